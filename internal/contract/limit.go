package contract

import (
	"context"
	"sync"
	"time"
)

// limit is an evaluation's time limit: a context that ends once the evaluation has run for its
// limit, not counting the time it was paused. A CPU evaluation pauses it while it waits for its
// turn at the host's CPUs (cputurn.go), which another command's timing may hold for minutes:
// that wait is not the kernel's time, and must not end its evaluation as a timeout. (A GPU
// evaluation waits for its GPU before the limit starts; on the CPU only the timed calls take
// turns, so the wait falls inside.)
type limit struct {
	context.Context
	parent context.Context
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	timer  *time.Timer
	end    time.Time // when the timer fires, while it runs
}

func newLimit(parent context.Context, d time.Duration) *limit {
	ctx, cancel := context.WithCancelCause(parent)
	l := &limit{Context: ctx, parent: parent, cancel: cancel, end: time.Now().Add(d)}
	l.timer = time.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return l
}

// Err is context.DeadlineExceeded once the limit is reached, as context.WithTimeout's is: the
// classification of a failure (describeErr) tells a timeout by it.
func (l *limit) Err() error {
	err := l.Context.Err()
	if err != nil && context.Cause(l.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// Deadline is when the limit would be reached if nothing paused it from now on.
func (l *limit) Deadline() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end, true
}

// pause stops the limit's clock until resume is called. A limit already reached stays so.
func (l *limit) pause() (resume func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.timer.Stop() {
		return func() {}
	}
	left := time.Until(l.end)
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.end = time.Now().Add(left)
		l.timer.Reset(left)
	}
}

// stop releases the limit's timer and ends its context.
func (l *limit) stop() {
	l.timer.Stop()
	l.cancel(context.Canceled)
}
