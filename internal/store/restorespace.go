package store

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kbplatform/kbplatform/internal/diskuse"
)

// restoreFactor is how many times a backup's size a restore may write: Badger writes every
// record to its log, then to a table when the memtable flushes, and a compaction holds a table's
// old and new copies at once until it finishes.
const restoreFactor = 3

// checkRestoreSpace refuses, before anything is written, a restore of a backup of size bytes
// into dir that its disk has no room for: restoreFactor times the backup, the reserve every
// write keeps (diskspace.go), and with force the backup of the records it replaces, which is
// written beside the folder first (at most what the folder holds). A restore cut short by a full
// disk would leave a database holding part of the backup. size < 0 (not known) is not checked.
func checkRestoreSpace(dir string, size int64, force bool) error {
	if size < 0 {
		return nil
	}
	disk := existingParent(dir)
	free, err := freeBytes(disk)
	if err != nil {
		return nil // a file system whose room cannot be read is not refused
	}
	need := restoreFactor*size + diskReserve
	what := fmt.Sprintf("%d times the backup's %s, and the %s kbplatform keeps free for the database's own flushes", restoreFactor, mib(size), mib(diskReserve))
	if force {
		held := diskuse.Of(dir, 0)
		need += held
		what += fmt.Sprintf(", and %s for the backup of the records it replaces", mib(held))
	}
	if free >= need {
		return nil
	}
	return fmt.Errorf("%w: the disk holding %s has %s free, and restoring this backup needs about %s (%s). Nothing was changed: free space on that disk, or restore into a folder on another disk (--db NEW-FOLDER)",
		ErrDiskFull, dir, mib(free), mib(need), what)
}

// existingParent is dir, or its nearest ancestor that exists: where a folder not made yet will be.
func existingParent(dir string) string {
	dir = filepath.Clean(dir)
	for {
		if _, err := os.Stat(dir); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return dir
		}
		dir = up
	}
}
