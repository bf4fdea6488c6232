package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The helper runs from init, before main and before any flag parsing: a binary that imports this
// package (the kbplatform binary, the target plugin, a test binary of the contract) serves as its
// own helper without its main knowing, and the helper execs the program before anything else of
// the binary runs. os.Args[1] is never helperArg otherwise (it is not a command of any of them).
func init() {
	if len(os.Args) > 1 && os.Args[1] == helperArg {
		err := helperMain()
		fmt.Fprintf(os.Stderr, "%s%v\n", HelperPrefix, err)
		os.Exit(ExitHelper)
	}
}

// helperMain confines this process as its policy says and executes the program; it returns only
// on failure.
func helperMain() error {
	var req helperRequest
	if err := json.Unmarshal([]byte(os.Getenv(policyVar)), &req); err != nil {
		return fmt.Errorf("read the policy: %w", err)
	}
	if req.Path == "" || len(req.Args) == 0 {
		return errors.New("no program to run")
	}
	p := req.Policy
	if p.Mode == ModeOff {
		return syscall.Exec(req.Path, req.Args, p.Env)
	}
	st := Probe()
	if p.Mode == ModeRequire && len(st.Missing) > 0 {
		return fmt.Errorf("the sandbox is required but incomplete on this host: %s", strings.Join(st.Missing, "; "))
	}
	// Landlock, seccomp and execve all act on the calling thread: everything from here to the
	// exec runs on this one.
	runtime.LockOSThread()
	if !p.without(LayerLimits) {
		if err := setLimits(p); err != nil {
			return err
		}
		if os.Geteuid() == 0 && st.Tasks != "" {
			parent, v2 := pidsParent()
			if err := joinPidsGroup(parent, v2, maxTasks(p)); err != nil {
				return err
			}
		}
	}
	// The ruleset opens the policy's paths, which must happen before the capabilities go (a root
	// caller may read them only through CAP_DAC_OVERRIDE).
	rulesetFD, rulesetFlags, err := ruleset(p, st)
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if p.without(LayerLandlock) && rulesetFD >= 0 {
		unix.Close(rulesetFD)
		rulesetFD = -1
	}
	if rulesetFD >= 0 {
		if err := ll.LandlockRestrictSelf(rulesetFD, rulesetFlags); err != nil {
			return fmt.Errorf("landlock_restrict_self: %w", err)
		}
		unix.Close(rulesetFD)
	}
	if st.Seccomp && !p.without(LayerSeccomp) {
		if err := loadFilter(p); err != nil {
			return err
		}
	}
	if !p.without(LayerCapabilities) {
		if err := dropCapabilities(); err != nil {
			return err
		}
	}
	return syscall.Exec(req.Path, req.Args, p.Env)
}

// Probe says what a sandbox holds on this host (found once per process).
func Probe() Status { return probeOnce() }

var probeOnce = sync.OnceValue(func() Status {
	st := Status{Env: "allowlist"}
	if v, err := ll.LandlockGetABIVersion(); err == nil && v > 0 {
		st.Landlock = v
	} else {
		st.Missing = append(st.Missing, "landlock: not supported by this kernel or not enabled at boot (the filesystem is not confined)")
	}
	st.Seccomp = seccompSupported()
	if !st.Seccomp {
		st.Missing = append(st.Missing, "seccomp: not supported by this kernel (system calls are not filtered)")
	}
	switch {
	case st.Seccomp:
		st.Network = "denied"
	case st.Landlock >= 4:
		st.Network = "denied (tcp only)"
		st.Missing = append(st.Missing, "network: only TCP is denied (no seccomp for the other socket families)")
	default:
		st.Network = "open"
		st.Missing = append(st.Missing, "network: neither seccomp nor Landlock ABI 4 is available")
	}
	// Root is exempt from RLIMIT_NPROC: its bound is a pids cgroup, where one can be made.
	st.Tasks = "rlimit"
	if os.Geteuid() == 0 {
		if parent, _ := pidsParent(); parent != "" {
			st.Tasks = "cgroup"
		} else {
			st.Tasks = ""
			st.Missing = append(st.Missing, "processes: unbounded (root is exempt from RLIMIT_NPROC, and no pids cgroup is writable here)")
		}
	}
	st.Scoped = st.Landlock >= 6
	if st.Landlock > 0 && !st.Scoped {
		st.Missing = append(st.Missing, fmt.Sprintf("signals: Landlock ABI %d does not scope signals (ABI 6 does)", st.Landlock))
	}
	return st
})

// setLimits bounds what the program may take: no core dumps, open files, file size, and the tasks
// its user may run. RLIMIT_NPROC counts the user's tasks host-wide, so the bound is the count now
// plus the policy's headroom; it is enforced on root too once the capabilities are gone.
func setLimits(p Policy) error {
	lower := func(res int, want uint64) error {
		var cur unix.Rlimit
		if err := unix.Getrlimit(res, &cur); err != nil {
			return err
		}
		if cur.Max != unix.RLIM_INFINITY && cur.Max < want {
			want = cur.Max
		}
		return unix.Setrlimit(res, &unix.Rlimit{Cur: want, Max: want})
	}
	tasks := maxTasks(p)
	files := p.MaxOpenFiles
	if files == 0 {
		files = DefaultMaxOpenFiles
	}
	size := p.MaxFileBytes
	if size == 0 {
		size = DefaultMaxFileBytes
	}
	for _, l := range []struct {
		name string
		res  int
		v    uint64
	}{
		{"core", unix.RLIMIT_CORE, 0},
		{"nofile", unix.RLIMIT_NOFILE, files},
		{"fsize", unix.RLIMIT_FSIZE, size},
		{"nproc", unix.RLIMIT_NPROC, uint64(userTasks(os.Getuid())) + tasks},
	} {
		if err := lower(l.res, l.v); err != nil {
			return fmt.Errorf("limit %s: %w", l.name, err)
		}
	}
	return nil
}

func maxTasks(p Policy) uint64 {
	if p.MaxTasks == 0 {
		return DefaultMaxTasks
	}
	return p.MaxTasks
}

// userTasks counts the tasks (processes and their threads) of uid, as RLIMIT_NPROC does.
func userTasks(uid int) int {
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	n := 0
	for _, name := range names {
		if _, err := strconv.Atoi(name); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/status")
		if err != nil {
			continue
		}
		var owner, threads int = -1, 0
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					owner, _ = strconv.Atoi(f[0])
				}
			} else if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				threads, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if owner == uid {
			n += max(threads, 1)
		}
	}
	return n
}

// ruleset builds the Landlock ruleset of p (fd -1 when the kernel has no Landlock). Best effort:
// rights the kernel's ABI does not know are left out, as Probe reported.
func ruleset(p Policy, st Status) (fd int, flags uint32, err error) {
	if st.Landlock == 0 {
		return -1, 0, nil
	}
	var rules []landlock.Rule
	dirs, files := split(p.ReadOnly)
	if len(dirs) > 0 {
		rules = append(rules, landlock.RODirs(dirs...))
	}
	if len(files) > 0 {
		rules = append(rules, landlock.ROFiles(files...))
	}
	dirs, files = split(p.ReadWrite)
	if len(dirs) > 0 {
		rules = append(rules, landlock.RWDirs(dirs...).WithRefer())
	}
	if len(files) > 0 {
		rules = append(rules, landlock.RWFiles(files...))
	}
	if dirs, _ := split(p.Writable); len(dirs) > 0 {
		rules = append(rules, landlock.PathAccess(ll.AccessFSWriteFile, dirs...))
	}
	if dirs, _ := split(p.Unlisted); len(dirs) > 0 {
		rules = append(rules, landlock.PathAccess(unlistedRights, dirs...))
	}
	if _, devs := split(p.Devices); len(devs) > 0 {
		rules = append(rules, landlock.RWFiles(devs...).WithIoctlDev())
	}
	// No network rule: with TCP handled (ABI 4 on), no port may be bound or connected to.
	fd, flags, err = landlock.V11.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return -1, 0, fmt.Errorf("landlock ruleset: %w", err)
	}
	return fd, flags, nil
}

// unlistedRights are a Policy's Unlisted folders': files may be made, opened, truncated and removed
// by name; nothing may be listed, and no folder, link or device made.
const unlistedRights = landlock.AccessFSSet(ll.AccessFSMakeReg | ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSRemoveFile)

// split sorts paths into folders and other files, leaving out those that do not exist.
func split(paths []string) (dirs, files []string) {
	for _, p := range paths {
		st, err := os.Stat(p)
		switch {
		case err != nil:
		case st.IsDir():
			dirs = append(dirs, p)
		default:
			files = append(files, p)
		}
	}
	return dirs, files
}

// dropCapabilities leaves the process, and what it executes, without any capability: a root caller
// keeps its uid (its files stay its own) but loses what root may do beyond that (read any file,
// ignore limits, trace any process, load modules). The bounding set goes first (it caps what an
// exec grants root), then the ambient and inheritable sets, then the rest.
func dropCapabilities() error {
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	if os.Geteuid() == 0 {
		for c := 0; c <= last; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
			}
		}
	}
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	return nil
}

func command(p Policy, name string, args ...string) (*exec.Cmd, error) {
	return helperCommand(p, name, args...)
}
