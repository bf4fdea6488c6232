package sandbox

import (
	"fmt"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// deniedCalls are system calls a kernel, its build and its harness never make: they reach into
// other processes (ptrace, process_vm_*, pidfd_getfd, kcmp), change the system (mount and the new
// mount API, module loading, kexec, reboot, swap, clocks, accounting), leave the sandbox's view
// (namespaces, chroot), or reach kernel objects no evaluation needs (bpf, keyrings, userfaultfd,
// file handles, fanotify). Each fails with EPERM.
var deniedCalls = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"unshare", "setns",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
	"swapon", "swapoff", "acct", "quotactl", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "syslog",
	"bpf", "keyctl", "add_key", "request_key", "userfaultfd", "open_by_handle_at", "name_to_handle_at",
	"fanotify_init", "iopl", "ioperm", "lookup_dcookie",
}

// deniedFamilies are the socket families refused: the network (inet, inet6, packet).
//
// Unix sockets may be made but reach nobody: connect fails with ECONNREFUSED, as for a socket
// nobody listens on, and so does sendto with an address. A named or abstract unix socket would
// reach any local service (the database's holder among them, an agent, Docker). Refusing the
// socket itself is what the GPU forbids: CUDA's initialisation makes a unix socket (to look for
// the MPS daemon and nvidia-persistenced) and fails with error 304 when socket() is refused, while
// a refused connection is what it meets on any host without them. Pairs of connected unix
// sockets (socketpair), which the Python runtime uses, work as before.
var deniedFamilies = []uint64{unix.AF_INET, unix.AF_INET6, unix.AF_PACKET}

// filter is the seccomp policy of p.
func filter(p Policy) seccomp.Policy {
	names := append([]string(nil), deniedCalls...)
	if !p.Profiling {
		names = append(names, "perf_event_open")
	}
	var socket []seccomp.NameWithConditions
	for _, fam := range deniedFamilies {
		socket = append(socket, seccomp.NameWithConditions{Name: "socket", Conditions: seccomp.ArgumentConditions{
			{Argument: 0, Operation: seccomp.Equal, Value: fam},
		}})
	}
	refused := seccomp.ActionErrno | seccomp.Action(unix.ECONNREFUSED)
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: names},
			{Action: seccomp.ActionErrno, NamesWithCondtions: socket},
			{Action: refused, Names: []string{"connect"}},
			// send() is sendto without an address: only a send to an address is refused.
			{Action: refused, NamesWithCondtions: []seccomp.NameWithConditions{{Name: "sendto", Conditions: seccomp.ArgumentConditions{
				{Argument: 4, Operation: seccomp.NotEqual, Value: 0},
			}}}},
		},
	}
}

// loadFilter installs the filter on this thread (no_new_privs is set already); an exec from it
// keeps the filter.
func loadFilter(p Policy) error {
	if err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Policy: filter(p)}); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}

func seccompSupported() bool { return seccomp.Supported() }
