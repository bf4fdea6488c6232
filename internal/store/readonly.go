package store

import (
	"errors"
	"fmt"
	"os"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

// ErrReadOnly means a write was asked of a store opened read-only.
var ErrReadOnly = errors.New("the database was opened read-only")

// A command that only reads opens the database with Badger's ReadOnly: no LOCK pid file, no new
// memtable or value log, no compaction, nothing deleted, so it works on a folder it cannot write
// (a shared result set, a backup mounted read-only) and never changes what it reads.
//
// The one exception is the log of a kbplatform process that was killed: Badger in ReadOnly
// refuses a log it would have to truncate. Like SQLite's reader that rolls back a hot journal, the
// reader then replays it once, read-write, when it may write the folder (the replay keeps every
// record and deletes none), and says so; where it may not, it says who can.
func openBadgerReadOnly(dir string, notice func(string)) (kv, error) {
	fresh, err := isFresh(dir)
	if err != nil {
		return nil, err
	}
	if fresh {
		return emptyKV{}, nil // nothing stored yet, and a reader creates nothing
	}
	if held, err := checkTables(dir, true); err != nil {
		return nil, err
	} else if held {
		return nil, errHeld
	}
	db, err := badger.Open(badgerOptions(dir).WithReadOnly(true))
	if err != nil && strings.Contains(err.Error(), badger.ErrTruncateNeeded.Error()) {
		if unix.Access(dir, unix.W_OK) != nil {
			return nil, fmt.Errorf("%w: %s was left by a kbplatform process that was killed before it closed the database; its last writes are in its log, which must be replayed by someone who may write the folder. Nothing was changed: run kbplatform db check as a user who may write %s", ErrRecoveryNeeded, dir, dir)
		}
		if notice != nil {
			notice(fmt.Sprintf("replaying the log of a kbplatform process that was killed while it held %s (no record is lost)", dir))
		}
		if err := replay(dir); err != nil {
			return nil, err
		}
		db, err = badger.Open(badgerOptions(dir).WithReadOnly(true))
	}
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") || strings.Contains(err.Error(), "resource temporarily unavailable") {
			return nil, errHeld
		}
		return nil, fmt.Errorf("open database %s read-only: %w", dir, err)
	}
	return &badgerKV{db: db}, nil
}

// replay opens the database read-write and closes it: Badger replays the log into a table.
func replay(dir string) error {
	b, err := openBadger(dir)
	if err != nil {
		return err
	}
	if err := b.close(); err != nil {
		return fmt.Errorf("replay the log of %s: %w", dir, err)
	}
	return nil
}

// ErrRecoveryNeeded means the database holds the unfinished log of a killed process and this
// process may not replay it.
var ErrRecoveryNeeded = errors.New("the database needs recovery")

// isFresh is true where no database was ever written: the folder, or its MANIFEST and every data
// file, are absent.
func isFresh(dir string) (bool, error) {
	names, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range names {
		n := e.Name()
		if n == badger.ManifestFilename || strings.HasSuffix(n, ".sst") || strings.HasSuffix(n, ".vlog") || strings.HasSuffix(n, ".mem") {
			return false, nil
		}
	}
	return true, nil
}

// emptyKV is a database nothing was ever written to, as a reader sees it.
type emptyKV struct{}

func (emptyKV) get(string) ([]byte, error)                                   { return nil, ErrNotFound }
func (emptyKV) scan(string, bool, func(key, val []byte) (bool, error)) error { return nil }
func (emptyKV) put(map[string][]byte) error                                  { return ErrReadOnly }
func (emptyKV) close() error                                                 { return nil }
