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
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
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
// held is true when another process holds the lock (the caller goes through its socket). shared
// takes the lock as a reader does (Badger's ReadOnly takes it shared), so that two read commands
// do not keep each other out.
//
// Every table the MANIFEST lists must then be there and readable: Badger panics in a goroutine of
// its own on a table whose end was cut off (a stack trace, nothing to recover), and silently
// leaves out one whose checksum does not match, so that its records read as "not found".
func checkTables(dir string, shared bool) (held bool, err error) {
	d, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer d.Close()
	how := unix.LOCK_EX
	if shared {
		how = unix.LOCK_SH
	}
	if err := unix.Flock(int(d.Fd()), how|unix.LOCK_NB); err != nil {
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
			if id, ok := tableID(n); ok {
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
	if bad := damagedTables(dir, &m, false); len(bad) > 0 {
		return false, tablesErr(dir, bad)
	}
	return false, nil
}

// damagedTables opens every table the manifest lists, as Badger will, and says what is wrong with
// each one that is missing or cannot be read. full reads every block and checks its checksum
// (db check); otherwise only the index at the table's end is read and checked, which is where a
// table cut short or overwritten with zeros shows.
func damagedTables(dir string, m *badger.Manifest, full bool) []string {
	ids := make([]uint64, 0, len(m.Tables))
	for id := range m.Tables {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var bad []string
	for _, id := range ids {
		name := fmt.Sprintf("%06d.sst", id)
		if err := verifyTable(filepath.Join(dir, name), m.Tables[id].Compression, full); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", name, err))
		}
	}
	return bad
}

func tablesErr(dir string, bad []string) error {
	return fmt.Errorf("%w: %d table(s) of %s cannot be read:\n  %s\nNothing was changed. Restore the database from a backup (kbplatform db restore FILE --db NEW-FOLDER, or put the folder back); kbplatform db check lists every damaged file", ErrDamaged, len(bad), dir, strings.Join(bad, "\n  "))
}

// verifyTable opens one table read-only in this goroutine, so that a panic inside Badger's table
// code (it slices by lengths read from the file) becomes an error here. The table is closed by
// hand: Table.DecrRef deletes the file when the last reference goes.
func verifyTable(path string, c options.CompressionType, full bool) (err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return errors.New("missing (the MANIFEST lists it)")
	}
	if err != nil {
		return err
	}
	if fi.Size() < 8 {
		return fmt.Errorf("%d bytes long: cut short", fi.Size())
	}
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer func() { _ = mf.Close(-1) }()
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("its index cannot be read: the file was cut short or overwritten")
		}
	}()
	opts := table.Options{
		ReadOnly:    true,
		Compression: c,
		BlockSize:   badger.DefaultOptions("").BlockSize,
		ChkMode:     options.NoVerification,
	}
	if full {
		opts.ChkMode = options.OnTableRead
	}
	t, err := table.OpenTable(mf, opts)
	if err != nil {
		return fmt.Errorf("cannot be read (%v)", firstLine(err))
	}
	if t.KeyCount() == 0 || len(t.Smallest()) == 0 {
		// An index of zeros passes its (empty) checksum and describes a table with nothing in it.
		return errors.New("its index is empty: the file was overwritten")
	}
	return nil
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// tableID is the number in a Badger table file's name ("000042.sst"); ok is false for any other
// file.
func tableID(name string) (uint64, bool) {
	if !strings.HasSuffix(name, ".sst") {
		return 0, false
	}
	id, err := strconv.ParseUint(strings.TrimSuffix(name, ".sst"), 10, 64)
	return id, err == nil
}
