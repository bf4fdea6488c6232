package study

import (
	"sync"
	"time"
)

// Status is a study run's counts at one moment, for a progress bar.
type Status struct {
	Study string
	Total int
	// Done counts finished units, Skipped those of them an earlier run finished.
	Done, Skipped, Failed int
	RunningUnits          []string
	// ETA is the time left, from this run's finished units' durations and how many run at once;
	// 0 until a unit has finished.
	ETA     time.Duration
	Elapsed time.Duration
}

// tracker counts a run's units.
type tracker struct {
	mu                    sync.Mutex
	study                 string
	total, parallel       int
	done, skipped, failed int
	launched              int
	running               []string
	durations             time.Duration
	finished              int
	start                 time.Time
}

func newTracker(study string, total, parallel int) *tracker {
	return &tracker{study: study, total: total, parallel: parallel, start: time.Now()}
}

func (t *tracker) skip() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done++
	t.skipped++
}

func (t *tracker) begin(label string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.launched++
	t.running = append(t.running, label)
}

// started is how many units have started so far, earlier runs' included.
func (t *tracker) started() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.skipped + t.launched
}

func (t *tracker) end(label string, took time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, l := range t.running {
		if l == label {
			t.running = append(t.running[:i], t.running[i+1:]...)
			break
		}
	}
	if ok {
		t.done++
	} else {
		t.failed++
	}
	t.durations += took
	t.finished++
}

func (t *tracker) status() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Status{Study: t.study, Total: t.total, Done: t.done, Skipped: t.skipped, Failed: t.failed,
		RunningUnits: append([]string(nil), t.running...), Elapsed: time.Since(t.start)}
	s.ETA = eta(t.total-t.done-t.failed, t.finished, t.durations, t.parallel)
	return s
}

// eta estimates the time left for left units from the mean duration of finished ones, run
// parallel at a time.
func eta(left, finished int, took time.Duration, parallel int) time.Duration {
	if finished == 0 || left <= 0 {
		return 0
	}
	par := min(parallel, left)
	if par < 1 {
		par = 1
	}
	return time.Duration(float64(took) / float64(finished) * float64(left) / float64(par))
}
