// Package placement decides which device of a host runs each evaluation. A device runs one
// evaluation at a time (two timings on one GPU would disturb each other), every device is kept
// busy while there is work, and a task goes back to a device that already holds its reference
// process (the local target keeps one per task and device), so the reference is not started
// again on every GPU.
package placement

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Scheduler hands out devices, one evaluation per device at a time. Waiters are served in
// arrival order, except that a device that frees up goes first to the oldest waiter whose task
// it already holds; a waiter whose own device is busy takes any idle device rather than leave
// it idle (its device is then the bottleneck, and one more reference start is the cheaper loss).
type Scheduler struct {
	mu      sync.Mutex
	devices []string
	busy    map[string]bool
	holds   map[string][]string // task → devices that ran it, most recent first
	homed   map[string]int      // device → tasks it holds, to place new tasks on the least loaded
	waiting []*waiter
	runs    map[string]int // device → evaluations handed out, for reports and tests
}

type waiter struct {
	task  string
	grant chan string
}

// New returns a scheduler over the given devices (names as the target gives them: cuda:0, …).
func New(devices []string) (*Scheduler, error) {
	if len(devices) == 0 {
		return nil, fmt.Errorf("placement: no devices")
	}
	seen := map[string]bool{}
	for _, d := range devices {
		if d == "" || seen[d] {
			return nil, fmt.Errorf("placement: device %q given twice or empty", d)
		}
		seen[d] = true
	}
	return &Scheduler{devices: slices.Clone(devices), busy: map[string]bool{}, holds: map[string][]string{},
		homed: map[string]int{}, runs: map[string]int{}}, nil
}

// Devices are the devices the scheduler places on.
func (s *Scheduler) Devices() []string { return slices.Clone(s.devices) }

// Acquire waits for a device for one evaluation of task and returns it with the function that
// gives it back (call it exactly once, when the evaluation has finished).
func (s *Scheduler) Acquire(ctx context.Context, task string) (string, func(), error) {
	return s.Request(task).Wait(ctx)
}

// Ticket is a place in the queue for one evaluation.
type Ticket struct {
	s *Scheduler
	w *waiter
}

// Request queues an evaluation of task now, so that a caller can queue several in order and wait
// for them apart: a device that frees up then chooses among all of them.
func (s *Scheduler) Request(task string) *Ticket {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &waiter{task: task, grant: make(chan string, 1)}
	s.waiting = append(s.waiting, w)
	s.dispatch()
	return &Ticket{s: s, w: w}
}

// Wait waits for the ticket's device; see Acquire. Call it once.
func (t *Ticket) Wait(ctx context.Context) (string, func(), error) {
	s, w := t.s, t.w
	select {
	case d := <-w.grant:
		return d, s.releaser(d), nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		if i := slices.Index(s.waiting, w); i >= 0 {
			s.waiting = slices.Delete(s.waiting, i, i+1)
			return "", nil, ctx.Err()
		}
		// Granted while we gave up: hand the device on.
		s.free(<-w.grant)
		return "", nil, ctx.Err()
	}
}

func (s *Scheduler) releaser(d string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.free(d)
		})
	}
}

func (s *Scheduler) free(d string) {
	s.busy[d] = false
	s.dispatch()
}

// dispatch grants idle devices to waiters; called with mu held.
func (s *Scheduler) dispatch() {
	for len(s.waiting) > 0 {
		wi, d := s.pick()
		if wi < 0 {
			return
		}
		w := s.waiting[wi]
		s.waiting = slices.Delete(s.waiting, wi, wi+1)
		s.busy[d] = true
		s.runs[d]++
		s.remember(w.task, d)
		w.grant <- d
	}
}

// pick chooses the next (waiter, device): the oldest waiter that an idle device holds the task
// of; else the oldest waiter, on the idle device holding fewest tasks. -1 when no device is idle.
func (s *Scheduler) pick() (int, string) {
	var idle []string
	for _, d := range s.devices {
		if !s.busy[d] {
			idle = append(idle, d)
		}
	}
	if len(idle) == 0 {
		return -1, ""
	}
	for wi, w := range s.waiting {
		for _, d := range s.holds[w.task] {
			if slices.Contains(idle, d) {
				return wi, d
			}
		}
	}
	best := idle[0]
	for _, d := range idle[1:] {
		if s.homed[d] < s.homed[best] {
			best = d
		}
	}
	return 0, best
}

// remember notes that d now holds task's reference.
func (s *Scheduler) remember(task, d string) {
	h := s.holds[task]
	if i := slices.Index(h, d); i >= 0 {
		h = slices.Delete(h, i, i+1)
	} else {
		s.homed[d]++
	}
	s.holds[task] = append([]string{d}, h...)
}

// Holds lists the devices that ran task, most recent first.
func (s *Scheduler) Holds(task string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.holds[task])
}

// Runs is how many evaluations each device was given.
func (s *Scheduler) Runs() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.runs {
		out[k] = v
	}
	return out
}
