package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/kbplatform/kbplatform/internal/queue"
)

// slots keep a study from having more evaluations in flight per GPU kind than there are live
// workers of the kind (at least one, so that a job can wait for the first worker to come): the
// rest wait here, in the study, where the model calls that feed them keep running.
type slots struct {
	conn *queue.Conn

	mu       sync.Mutex
	inflight map[string]int
	workers  map[string]int
	read     time.Time
	freed    chan struct{} // closed and replaced whenever a slot frees
}

func newSlots(c *queue.Conn) *slots {
	return &slots{conn: c, inflight: map[string]int{}, workers: map[string]int{}, freed: make(chan struct{})}
}

// capacity is the kind's live workers, read at most every two seconds.
func (s *slots) capacity(ctx context.Context, kind string) int {
	s.mu.Lock()
	stale := time.Since(s.read) > 2*time.Second
	s.mu.Unlock()
	if stale {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ws, err := s.conn.ListWorkers(lctx)
		cancel()
		if err == nil {
			n := map[string]int{}
			for _, w := range ws {
				n[w.Kind]++
			}
			s.mu.Lock()
			s.workers, s.read = n, time.Now()
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(1, s.workers[kind])
}

func (s *slots) acquire(ctx context.Context, kind string) error {
	for {
		c := s.capacity(ctx, kind)
		s.mu.Lock()
		if s.inflight[kind] < c {
			s.inflight[kind]++
			s.mu.Unlock()
			return nil
		}
		freed := s.freed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-freed:
		case <-time.After(2 * time.Second): // a worker may have joined
		}
	}
}

func (s *slots) release(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight[kind]--
	close(s.freed)
	s.freed = make(chan struct{})
}

// inFlight is the kind's evaluations in flight from this target.
func (s *slots) inFlight(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight[kind]
}
