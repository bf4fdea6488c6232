package store

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrDiskFull means the disk that holds the database has too little room for a write.
var ErrDiskFull = errors.New("the disk is full")

// diskReserve is the room kept free on the database's disk beyond a write's own bytes. Badger
// writes its log and its tables through memory-mapped files that it creates sparse, so a disk
// that fills under them does not fail a write: the process dies of SIGBUS (a 1,156-line
// goroutine dump, the evaluation in flight lost). Badger flushes the memtable into a table when
// it is full and when the database closes, so the reserve is one memtable's worth (the table
// written from it is no larger) and a margin for the manifest and the write itself.
const diskReserve = memTableSize + 8<<20

// DiskFullError says how much room the database's disk has and how much a write needs.
type DiskFullError struct {
	Dir        string
	Free, Need int64
	Err        error // the error of a write that failed with ENOSPC, when one did
}

func (e *DiskFullError) Error() string {
	what := fmt.Sprintf("%s free, %s needed (kbplatform keeps %s free for the database's own flushes: Badger writes through memory-mapped files, and a disk that fills under them crashes the process)",
		mib(e.Free), mib(e.Need), mib(diskReserve))
	if e.Err != nil {
		what = e.Err.Error()
	}
	return fmt.Sprintf("%s: the disk holding the database %s has no room (%s); nothing more was written, and every record stored before is kept. Free space there and run the command again (a study resumes after its last stored unit; kbplatform db check confirms the database is whole)",
		ErrDiskFull, e.Dir, what)
}

func (e *DiskFullError) Unwrap() error { return ErrDiskFull }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// freeBytes is the room an unprivileged writer has on dir's file system.
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// checkSpace fails with *DiskFullError when dir's disk has less than need bytes free beyond the
// reserve. A file system whose room cannot be read is not refused.
func checkSpace(dir string, need int64) error {
	free, err := freeBytes(dir)
	if err != nil {
		return nil
	}
	if free < need+diskReserve {
		return &DiskFullError{Dir: dir, Free: free, Need: need + diskReserve}
	}
	return nil
}

// diskFull turns a write's ENOSPC (or EDQUOT) into a *DiskFullError; other errors pass.
func diskFull(dir string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return &DiskFullError{Dir: dir, Err: err}
	}
	return err
}
