package contract

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A limit ends as context.WithTimeout does (DeadlineExceeded), and the time it was paused does
// not count.
func TestLimitPause(t *testing.T) {
	const d = 200 * time.Millisecond
	start := time.Now()
	l := newLimit(context.Background(), d)
	defer l.stop()
	resume := l.pause()
	time.Sleep(2 * d) // paused: the limit must not end meanwhile
	if err := l.Err(); err != nil {
		t.Fatalf("the limit ended while paused: %v", err)
	}
	resume()
	<-l.Done()
	if !errors.Is(l.Err(), context.DeadlineExceeded) {
		t.Fatalf("a reached limit's Err: %v", l.Err())
	}
	if ran := time.Since(start); ran < 3*d {
		t.Fatalf("the limit ended after %v: the %v paused counted", ran, 2*d)
	}
	// A parent's end is the parent's error, not a timeout.
	parent, cancel := context.WithCancel(context.Background())
	l2 := newLimit(parent, time.Hour)
	defer l2.stop()
	cancel()
	<-l2.Done()
	if !errors.Is(l2.Err(), context.Canceled) {
		t.Fatalf("a limit whose parent was cancelled: %v", l2.Err())
	}
}
