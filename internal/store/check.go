package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

// Health is what db check found.
type Health struct {
	Dir     string         `json:"dir"`
	Exists  bool           `json:"exists"`
	Holder  *HolderInfo    `json:"holder,omitempty"` // set when checked through a running holder: its files were not read
	Tables  int            `json:"tables"`
	Bytes   int64          `json:"bytes"`
	Records map[string]int `json:"records"` // by key prefix (docs/store-api.md)
	Damaged []string       `json:"damaged,omitempty"`
}

// OK is true when nothing is damaged.
func (h *Health) OK() bool { return len(h.Damaged) == 0 }

// Check reports the health of the database in dir without changing it: the MANIFEST against the
// folder, every table read whole with its checksums, then every record read through a read-only
// open (which reads the value log too). Unlike an open, it goes on past the first damaged file, so
// that the report names them all. A database another process holds is counted through it; its
// files are not read under it.
func Check(dir string) (*Health, error) {
	h := &Health{Dir: dir, Records: map[string]int{}}
	fresh, err := isFresh(dir)
	if err != nil {
		return nil, err
	}
	if fresh {
		return h, nil
	}
	h.Exists = true
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if err := unix.Flock(int(d.Fd()), unix.LOCK_SH|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
		return checkThroughHolder(h)
	} else if err != nil {
		return nil, err
	}
	defer unix.Flock(int(d.Fd()), unix.LOCK_UN)
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var tables []uint64
	for _, n := range names {
		if fi, err := os.Stat(filepath.Join(dir, n)); err == nil && fi.Mode().IsRegular() {
			h.Bytes += fi.Size()
		}
		if id, ok := tableID(n); ok {
			tables = append(tables, id)
		}
	}
	h.Tables = len(tables)
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if errors.Is(err, os.ErrNotExist) {
		h.Damaged = append(h.Damaged, "MANIFEST: missing (the folder holds data files)")
		return h, nil
	}
	if err != nil {
		return nil, err
	}
	m, _, err := badger.ReplayManifestFile(f, 0, badger.DefaultOptions(dir))
	f.Close()
	if err != nil {
		h.Damaged = append(h.Damaged, fmt.Sprintf("MANIFEST: cannot be read (%v)", firstLine(err)))
		return h, nil
	}
	for _, id := range tables {
		if _, ok := m.Tables[id]; !ok {
			h.Damaged = append(h.Damaged, fmt.Sprintf("%06d.sst: not listed in the MANIFEST (an open would delete it)", id))
		}
	}
	h.Damaged = append(h.Damaged, damagedTables(dir, &m, true)...)
	sort.Strings(h.Damaged)
	if len(h.Damaged) > 0 {
		return h, nil
	}
	unix.Flock(int(d.Fd()), unix.LOCK_UN) // the read-only open takes its own
	s, err := OpenWith(dir, Options{ReadOnly: true, Wait: time.Second})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if err := countRecords(s, h); err != nil {
		h.Damaged = append(h.Damaged, fmt.Sprintf("records: %v", firstLine(err)))
	}
	return h, nil
}

func checkThroughHolder(h *Health) (*Health, error) {
	s, err := OpenWith(h.Dir, Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if _, ok := s.kv.(*remoteKV); ok {
		if _, info, err := dialHolder(h.Dir); err == nil {
			h.Holder = &info
		}
	}
	return h, countRecords(s, h)
}

// countRecords reads every key and value, by prefix: a value Badger cannot read (a damaged value
// log) is an error here rather than in a later command.
func countRecords(s *Store, h *Health) error {
	return s.scan("", false, func(k, _ []byte) (bool, error) {
		p, _, ok := strings.Cut(string(k), "/")
		if !ok {
			p = "other"
		}
		h.Records[p+"/"]++
		return true, nil
	})
}
