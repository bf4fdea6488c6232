package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

// ErrDamaged means the database's files do not agree with each other: nothing was opened and
// nothing was changed.
var ErrDamaged = errors.New("the database is damaged")

// Badger trusts its MANIFEST: on open, a table the manifest does not list is deleted, and a
// missing manifest is created afresh, listing none. So a database whose MANIFEST was deleted or
// truncated lost every table to the next command that opened it, a read command included, which
// then printed "0 evaluations". checkTables refuses such a database before Badger sees it.
//
// A process killed between writing a table and recording it in the MANIFEST leaves such a table
// too (its records are still in Badger's log, so deleting it loses nothing); it is refused all the
// same, since the two cannot be told apart from the files, and the message says how to go on in
// either case: a refusal can be undone, a deletion cannot.
//
// It runs only where this process can take the directory lock Badger takes (a flock on the
// folder): a holder's MANIFEST may be half-way through an append, which must not read as damage.
// held is true when another process holds the lock (the caller goes through its socket).
func checkTables(dir string) (held bool, err error) {
	d, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer d.Close()
	if err := unix.Flock(int(d.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return true, nil
		}
		return false, err
	}
	defer unix.Flock(int(d.Fd()), unix.LOCK_UN)
	names, err := d.Readdirnames(-1)
	if err != nil {
		return false, err
	}
	var tables []uint64
	data := false
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, ".sst"):
			if id, err := strconv.ParseUint(strings.TrimSuffix(n, ".sst"), 10, 64); err == nil {
				tables = append(tables, id)
			}
			data = true
		case strings.HasSuffix(n, ".vlog"), strings.HasSuffix(n, ".mem"):
			data = true
		}
	}
	if !data {
		return false, nil // a new database
	}
	mf := filepath.Join(dir, badger.ManifestFilename)
	f, err := os.Open(mf)
	if errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("%w: %s has data files but no MANIFEST; opening it would start an empty database beside them. Nothing was changed: restore the folder (or its MANIFEST) from a backup, or move it aside and start a new database with --db", ErrDamaged, dir)
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	m, _, err := badger.ReplayManifestFile(f, 0, badger.DefaultOptions(dir))
	if err != nil {
		return false, fmt.Errorf("%w: %s cannot be read (%v). Nothing was changed: restore it from a backup, or move the folder aside and start a new database with --db", ErrDamaged, mf, err)
	}
	var unlisted []string
	for _, id := range tables {
		if _, ok := m.Tables[id]; !ok {
			unlisted = append(unlisted, fmt.Sprintf("%06d.sst", id))
		}
	}
	if len(unlisted) > 0 {
		sort.Strings(unlisted)
		return false, fmt.Errorf("%w: %s does not list %d of the folder's %d tables (%s): opening the database would delete them. Nothing was changed. If a kbplatform process was killed while it wrote these tables, they are ones it had not finished recording (their records are still in its log): move those files out of the folder and run again. Otherwise the MANIFEST was truncated or replaced: restore it from a backup, or move the folder aside and start a new database with --db", ErrDamaged, mf, len(unlisted), len(tables), strings.Join(unlisted, ", "))
	}
	return false, nil
}
