package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// RLIMIT_NPROC bounds the tasks a user may run, but never root's: the kernel exempts uid 0
// whatever its capabilities, and a fork bomb run by root took every PID of the host (the next
// evaluation's process could not even start). For root the bound is a pids cgroup of its own,
// made below the cgroup the helper runs in: cgroup v1's pids hierarchy, or cgroup v2 where the
// pids controller can be given to a child (the hierarchy's root, or a delegated subtree).

// pidsGroupName is the folder, in the helper's pids cgroup, that holds one cgroup per sandboxed
// process tree.
const pidsGroupName = "kbplatform-sandbox"

// pidsParent returns the cgroup folder below which a sandbox's pids cgroup is made, and whether
// it is cgroup v2; "" when there is none this process may write.
func pidsParent() (string, bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false
	}
	var v1, v2 string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case containsField(parts[1], "pids"):
			v1 = parts[2]
		}
	}
	if v1 != "" {
		if d := filepath.Join("/sys/fs/cgroup/pids", v1); writable(d) {
			return d, false
		}
	}
	if v2 != "" {
		d := filepath.Join("/sys/fs/cgroup", v2)
		if c, err := os.ReadFile(filepath.Join(d, "cgroup.controllers")); err == nil && containsField(strings.ReplaceAll(string(c), " ", ","), "pids") && writable(d) {
			return d, true
		}
	}
	return "", false
}

func containsField(list, name string) bool {
	for _, f := range strings.Split(strings.TrimSpace(list), ",") {
		if f == name {
			return true
		}
	}
	return false
}

func writable(dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && st.IsDir() && unix.Access(dir, unix.W_OK) == nil
}

// joinPidsGroup moves this process into a new pids cgroup that holds at most max tasks, below
// parent. It first removes the cgroups left by trees that have ended: each is named after the pid
// of the process it was made for, and only one whose process is gone is removed (another helper's
// may still be empty, between its making and its joining; a cgroup with a task in it cannot be
// removed anyway).
func joinPidsGroup(parent string, v2 bool, max uint64) error {
	group := filepath.Join(parent, pidsGroupName)
	if err := os.Mkdir(group, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("pids cgroup: %w", err)
	}
	if v2 {
		// The pids controller must reach the group's children: enabled in the parent's and the
		// group's subtree control (the parent's fails where it holds processes and is not the
		// hierarchy's root).
		for _, d := range []string{parent, group} {
			if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+pids"), 0); err != nil {
				return fmt.Errorf("pids cgroup: enable pids in %s: %w", d, err)
			}
		}
	}
	if old, err := os.ReadDir(group); err == nil {
		for _, e := range old {
			if pid, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() && unix.Kill(pid, 0) == unix.ESRCH {
				_ = os.Remove(filepath.Join(group, e.Name()))
			}
		}
	}
	mine := filepath.Join(group, strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(mine, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("pids cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(mine, "pids.max"), []byte(strconv.FormatUint(max, 10)), 0); err != nil {
		return fmt.Errorf("pids cgroup: set pids.max: %w", err)
	}
	if err := os.WriteFile(filepath.Join(mine, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fmt.Errorf("pids cgroup: join: %w", err)
	}
	return nil
}
