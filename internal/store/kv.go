package store

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
)

// kv is what records are kept in: Badger in the process that holds the database, the holder's
// socket in any other. Both give the same answers; only the holder touches the files.
type kv interface {
	get(key string) ([]byte, error) // ErrNotFound when absent
	scan(prefix string, reverse bool, fn func(key, val []byte) (bool, error)) error
	put(kvs map[string][]byte) error // in one transaction, synced
	close() error
}

// badgerKV is the database itself.
type badgerKV struct {
	db  *badger.DB
	dir string
	// writable: this process may write the files (not a ReadOnly open), so each write and the
	// close's flush first make sure the disk has room for them (diskspace.go).
	writable bool
}

// errHeld means another process holds the directory lock.
var errHeld = errors.New("held by another process")

func openBadger(dir string) (*badgerKV, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if held, err := checkTables(dir, false); err != nil {
		return nil, err
	} else if held {
		return nil, errHeld
	}
	// Opening replays a killed process's log into a table, and the first write maps a new log:
	// both need room (diskspace.go).
	if err := checkSpace(dir, 0); err != nil {
		return nil, err
	}
	db, err := badger.Open(badgerOptions(dir))
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") || strings.Contains(err.Error(), "resource temporarily unavailable") {
			return nil, errHeld
		}
		return nil, fmt.Errorf("open database %s: %w", dir, diskFull(dir, err))
	}
	return &badgerKV{db: db, dir: dir, writable: true}, nil
}

// memTableSize is Badger's memtable (and so its log file's) size: what a flush writes at most.
// Small, so that the room kept free for a flush is small too (diskReserve).
const memTableSize = 16 << 20

// badgerOptions are the options every open uses; a reader adds ReadOnly.
func badgerOptions(dir string) badger.Options {
	return badger.DefaultOptions(dir).
		WithSyncWrites(true).
		WithLogger(quietLogger{}).
		WithNumVersionsToKeep(1).
		WithMemTableSize(memTableSize).
		WithValueLogFileSize(256 << 20)
}

// close flushes the memtable into a table and closes the files. On a disk without room for
// the flush it leaves the database open instead, to be released when the process ends: the
// records are already in the synced log, which the next command replays as after a kill, where
// a flush into a full disk would die of SIGBUS.
func (b *badgerKV) close() error {
	if b.writable {
		if err := checkSpace(b.dir, 0); err != nil {
			return fmt.Errorf("the database was left for the next command to finish (its records are in its log): %w", err)
		}
	}
	return b.db.Close()
}

func (b *badgerKV) put(kvs map[string][]byte) error {
	var size int64
	for k, v := range kvs {
		size += int64(len(k) + len(v))
	}
	// Twice the bytes: the log holds each record once, and the flush's table once more.
	if err := checkSpace(b.dir, 2*size); err != nil {
		return err
	}
	return diskFull(b.dir, b.db.Update(func(txn *badger.Txn) error {
		keys := make([]string, 0, len(kvs))
		for k := range kvs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := txn.Set([]byte(k), kvs[k]); err != nil {
				return err
			}
		}
		return nil
	}))
}

func (b *badgerKV) get(key string) ([]byte, error) {
	var out []byte
	err := b.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get([]byte(key))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		out, err = it.ValueCopy(nil)
		return err
	})
	return out, err
}

func (b *badgerKV) scan(prefix string, reverse bool, fn func(key, val []byte) (bool, error)) error {
	return b.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Reverse = reverse
		opts.Prefix = []byte(prefix)
		it := txn.NewIterator(opts)
		defer it.Close()
		seek := []byte(prefix)
		if reverse {
			seek = append(append([]byte(nil), seek...), 0xff)
		}
		for it.Seek(seek); it.ValidForPrefix([]byte(prefix)); it.Next() {
			item := it.Item()
			var cont bool
			err := item.Value(func(v []byte) error {
				var err error
				cont, err = fn(item.KeyCopy(nil), v)
				return err
			})
			if err != nil {
				return err
			}
			if !cont {
				return nil
			}
		}
		return nil
	})
}

type quietLogger struct{}

func (quietLogger) Errorf(f string, a ...any) { fmt.Fprintf(os.Stderr, "badger: "+f, a...) }
func (quietLogger) Warningf(f string, a ...any) {
	if !strings.Contains(f, "ignoring") {
		fmt.Fprintf(os.Stderr, "badger: "+f, a...)
	}
}
func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Debugf(string, ...any) {}
