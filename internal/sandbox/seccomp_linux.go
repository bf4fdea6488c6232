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

// deniedFamilies are the socket families refused: the network (inet, inet6, packet), and named
// unix sockets, which would reach any local service (the database's holder among them). Pairs of
// connected unix sockets (socketpair), which the Python runtime uses, stay allowed.
var deniedFamilies = []uint64{unix.AF_INET, unix.AF_INET6, unix.AF_PACKET, unix.AF_UNIX}

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
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: names},
			{Action: seccomp.ActionErrno, NamesWithCondtions: socket},
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
