package store

import (
	"errors"
	"fmt"
	"time"
)

// Options tune how a database is opened.
type Options struct {
	// Wait is how long to keep trying when another process holds the database but does not
	// answer on its socket yet (starting) or any more (finishing). Zero: 15 s.
	Wait time.Duration
	// ReaderWait is how long a command that writes waits while only read-only commands hold the
	// database (readers.go): they hold it for as long as they run, and will let go. Zero: 10 min.
	ReaderWait time.Duration
	// Notice, when set, is told once when this process goes through another's socket.
	Notice func(string)
	// ReadOnly opens the database for a command that only reads: Badger's ReadOnly mode (or the
	// holder's socket), never creating, compacting or deleting a file; writes fail with
	// ErrReadOnly. A database that does not exist yet reads as empty and is not created.
	ReadOnly bool
}

// Open opens the database in dir (creating it if needed). When another kbplatform process holds
// it, the store reads and writes through that process's socket instead; when that process ends,
// the store takes the database over.
func Open(dir string) (*Store, error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options.
func OpenWith(dir string, opt Options) (*Store, error) {
	if opt.Wait == 0 {
		opt.Wait = 15 * time.Second
	}
	if opt.ReaderWait == 0 {
		opt.ReaderWait = 10 * time.Minute
	}
	s := &Store{dir: dir, opt: opt}
	if err := s.connect(); err != nil {
		return nil, err
	}
	return s, nil
}

// connect holds the database, or goes through its holder; it waits while neither is possible
// (a holder starting up or shutting down).
func (s *Store) connect() error {
	start := time.Now()
	deadline := start.Add(s.opt.Wait)
	delay := 20 * time.Millisecond
	toldReaders := false
	for {
		if s.opt.ReadOnly {
			k, err := openBadgerReadOnly(s.dir, s.opt.Notice)
			if err == nil {
				s.kv = k
				return nil
			}
			if !errors.Is(err, errHeld) {
				return err
			}
		} else if b, err := openBadger(s.dir); err == nil {
			s.kv = b
			if srv, err := serve(b, s.dir); err == nil {
				s.srv = srv
			} else if s.opt.Notice != nil {
				s.opt.Notice(fmt.Sprintf("other kbplatform commands cannot use %s while this one runs: %v", s.dir, err))
			}
			return nil
		} else if !errors.Is(err, errHeld) {
			return err
		}
		r, info, rerr := dialHolder(s.dir)
		if rerr == nil {
			s.kv = r
			if s.opt.Notice != nil {
				s.opt.Notice(fmt.Sprintf("the database is held by kbplatform process %d (%s); going through it", info.PID, info.Command))
			}
			return nil
		}
		readers := !s.opt.ReadOnly && readersOnly(s.dir)
		if !readers && toldReaders { // the readers left, and a holder took the database
			toldReaders, deadline = false, time.Now().Add(s.opt.Wait)
		}
		if readers && !toldReaders {
			toldReaders = true
			deadline = start.Add(max(s.opt.Wait, s.opt.ReaderWait))
			if s.opt.Notice != nil {
				s.opt.Notice(fmt.Sprintf("%s has the database %s open; waiting for it to finish (up to %s)", readersHolding(s.dir), s.dir, max(s.opt.Wait, s.opt.ReaderWait)))
			}
		}
		if time.Now().After(deadline) {
			if readers {
				return fmt.Errorf("%w (%s): %s holds it, and this command waited %s for it; that command only reads and will finish: run this command again then, or use another --db",
					ErrLocked, s.dir, readersHolding(s.dir), time.Since(start).Round(time.Second))
			}
			return fmt.Errorf("%w (%s): its holder does not answer on its socket (%v); wait for it to finish or use another --db",
				ErrLocked, s.dir, rerr)
		}
		time.Sleep(delay)
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// do runs op on the current connection; when the holder went away in between, it takes the
// database over (or finds its new holder) and runs op once more.
func (s *Store) do(op func(kv) error) error {
	s.mu.Lock()
	k := s.kv
	s.mu.Unlock()
	if k == nil {
		return errors.New("the database is closed")
	}
	err := op(k)
	if !errors.Is(err, errHolderGone) {
		return err
	}
	s.mu.Lock()
	if s.kv == k {
		_ = k.close()
		s.kv = nil
		if cerr := s.connect(); cerr != nil {
			s.mu.Unlock()
			return fmt.Errorf("%w; then: %v", err, cerr)
		}
	}
	k = s.kv
	s.mu.Unlock()
	return op(k)
}
