// Package diskuse says how much disk space the files under a folder take: what a full disk's
// messages and checks weigh (a kernel's own files in its work folder, a database before it is
// replaced).
package diskuse

import (
	"io/fs"
	"path/filepath"
	"syscall"
)

// Of is the disk space the regular files under dir take: their allocated blocks, so that a sparse
// file counts for what it holds, not for its length. At most max entries are read (0: every one):
// a folder a kernel wrote can hold millions of files, and a bound keeps the walk short.
func Of(dir string, max int) int64 {
	var n int64
	seen := 0
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if seen++; max > 0 && seen > max {
			return filepath.SkipAll
		}
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			} else {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
