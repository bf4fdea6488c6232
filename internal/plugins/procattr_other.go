//go:build !linux

package plugins

import "syscall"

// pluginProcAttr starts a plugin in a session of its own (no parent-death signal outside Linux).
func pluginProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}
