package store

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A command that only reads opens the database with Badger's ReadOnly, which takes the folder's
// lock shared and serves no socket. A command that writes then finds the database held and no
// one to answer on a socket, as it does while a holder is starting or finishing; but a reader
// is neither: it holds the database for as long as its command runs (a db check or an export of
// a large database: minutes), and it will let go. So a writer tells the two apart (readersOnly),
// waits for readers longer (Options.ReaderWait), says whom it waits for, and if they outlast
// that, says that a read-only command holds the database, not that a holder does not answer.

// readersOnly reports whether the lock on dir is held shared only, by read-only opens: a shared
// lock can be taken beside it (an exclusive holder, a writing command, would refuse it).
func readersOnly(dir string) bool {
	d, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer d.Close()
	if err := unix.Flock(int(d.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return false
	}
	unix.Flock(int(d.Fd()), unix.LOCK_UN)
	return true
}

// lockHolders names the processes that hold a flock on dir, from /proc/locks ("pid N
// (kbplatform results list)"); this process's own locks are left out. Empty where it cannot say.
func lockHolders(dir string) []string {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return nil
	}
	// /proc/locks names a file as MAJOR:MINOR:INODE, the device numbers in hex.
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil
	}
	defer f.Close()
	var who []string
	seen := map[int]bool{os.Getpid(): true}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  READ  4242 fd:01:1234 0 EOF"
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != id {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || seen[pid] {
			continue
		}
		seen[pid] = true
		who = append(who, fmt.Sprintf("pid %d (%s)", pid, commandOf(pid)))
	}
	return who
}

// commandOf is a process's command as a person typed it: the program's name and its first words
// that are not flags ("kbplatform results list").
func commandOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return "gone"
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	words := []string{filepath.Base(args[0])}
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "-") || len(words) == 3 {
			break
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

// readersHolding says who holds dir's lock for reading, for a message: "a read-only kbplatform
// command (pid 4242 (kbplatform results list))".
func readersHolding(dir string) string {
	who := lockHolders(dir)
	if len(who) == 0 {
		return "a read-only kbplatform command"
	}
	return "a read-only kbplatform command (" + strings.Join(who, ", ") + ")"
}
