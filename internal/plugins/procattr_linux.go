package plugins

import "syscall"

// pluginProcAttr starts a plugin in a session of its own that the kernel kills when the host
// dies, by any signal, kill -9 included (the parent-death signal): a plugin must not outlive the
// process that started it. What the plugin starts goes the same way: the target's worker
// shepherds carry a parent-death signal of their own, and a shepherd ends its whole tree.
func pluginProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}
