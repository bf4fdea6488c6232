package store

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// ErrNotEmpty means a restore was asked into a database that already holds records.
var ErrNotEmpty = errors.New("the database is not empty")

// Backups are Badger's own stream format (DB.Backup, DB.Load): every key and value with its
// version, in one file, restorable by kbplatform and by Badger's own tools.

// BackupFile writes a backup of every record to path. It is written beside path first and
// renamed when complete and synced, so a backup cut short (a full disk, a kill) never sits under
// the name of a good one. A database held by another process is backed up through that process.
func (s *Store) BackupFile(path string) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.partial")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	cw := &countingWriter{w: tmp}
	if err := s.do(func(k kv) error { return backup(k, cw) }); err != nil {
		tmp.Close()
		return cw.n, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return cw.n, err
	}
	if err := tmp.Close(); err != nil {
		return cw.n, err
	}
	return cw.n, os.Rename(tmp.Name(), path)
}

func backup(k kv, w io.Writer) error {
	switch k := k.(type) {
	case *badgerKV:
		_, err := k.db.Backup(w, 0)
		return err
	case *remoteKV:
		return k.backup(w)
	case emptyKV:
		return nil // an empty stream: Load reads it as no records
	}
	return fmt.Errorf("backup: unknown database connection %T", k)
}

// backup streams the holder's backup. Its errors are not errHolderGone: part of the stream may
// have been written, and a retry would repeat it.
func (r *remoteKV) backup(w io.Writer) error {
	resp, err := r.c.Get("http://kbplatform" + pathBackup)
	if err != nil {
		return fmt.Errorf("the kbplatform process holding the database did not answer: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusErr(resp)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("the backup from the kbplatform process holding the database broke off: %w", err)
	}
	if resp.Trailer.Get(trailerBackupError) != "" {
		return fmt.Errorf("database holder: %s", resp.Trailer.Get(trailerBackupError))
	}
	return nil
}

// RestoreReport says what a restore did.
type RestoreReport struct {
	Loaded   int    // records in the database after the restore
	Replaced int    // records the database held before (0 unless forced)
	SavedTo  string // where those were backed up first
}

// Restore loads the backup r into the database in dir, which this process must hold (a restore
// through another process, while it writes, would mix two databases). Into a database that holds
// records it refuses, unless force: then those records are first backed up to a file beside the
// folder, which the report names, and replaced by the backup's. Nothing is lost without a word.
// size is the backup's size in bytes (-1 when not known): a disk without room for what the
// restore writes is refused before anything is written (restorespace.go).
func Restore(dir string, r io.Reader, size int64, force bool) (RestoreReport, error) {
	var rep RestoreReport
	if err := checkRestoreSpace(dir, size, force); err != nil {
		return rep, err
	}
	b, err := openBadger(dir)
	if errors.Is(err, errHeld) {
		who := "another kbplatform process"
		if _, info, err := dialHolder(dir); err == nil {
			who = fmt.Sprintf("kbplatform process %d (%s)", info.PID, info.Command)
		}
		return rep, fmt.Errorf("%w (%s): %s holds it; restore when it has finished", ErrLocked, dir, who)
	}
	if err != nil {
		return rep, err
	}
	defer b.close()
	if rep.Replaced, err = countAll(b.db); err != nil {
		return rep, err
	}
	if rep.Replaced > 0 {
		if !force {
			return rep, fmt.Errorf("%w: %s holds %d records. Nothing was changed: restore into a new folder (--db), or pass --force to replace them (they are backed up first)", ErrNotEmpty, dir, rep.Replaced)
		}
		rep.SavedTo = fmt.Sprintf("%s.before-restore-%s.bak", filepath.Clean(dir), time.Now().UTC().Format("20060102T150405Z"))
		if err := backupBadger(b, rep.SavedTo); err != nil {
			return rep, fmt.Errorf("back up the records the restore would replace: %w; nothing was changed", err)
		}
		if err := b.db.DropAll(); err != nil {
			return rep, fmt.Errorf("clear the database before the restore: %w (its records are in %s)", err, rep.SavedTo)
		}
	}
	if err := b.db.Load(r, 256); err != nil {
		return rep, fmt.Errorf("load the backup: %w", err)
	}
	if err := b.db.Sync(); err != nil {
		return rep, err
	}
	rep.Loaded, err = countAll(b.db)
	return rep, err
}

// backupBadger writes b's backup to path, synced, through a temporary name.
func backupBadger(b *badgerKV, path string) error {
	s := &Store{kv: b}
	_, err := s.BackupFile(path)
	return err
}

func countAll(db *badger.DB) (int, error) {
	n := 0
	err := db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	return n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
