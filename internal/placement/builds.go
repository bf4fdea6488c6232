package placement

import (
	"context"
	"sync"
)

// Builds runs each build once, however many devices will evaluate it: a candidate's extension
// is built for a device model (the same source, flags and GPU model give the same binary), so a
// second device of that model reuses the first build rather than compiling again. Builds are
// bounded by a shared pool of workers. The most recent keepBuilds results are kept (a study of
// thousands of candidates must not hold every build log), older ones are built again if asked.
type Builds[T any] struct {
	sem   chan struct{}
	mu    sync.Mutex
	done  map[string]*build[T]
	order []string // keys, oldest first
}

const keepBuilds = 1024

type build[T any] struct {
	ready chan struct{}
	val   T
	err   error
}

// NewBuilds shares workers build workers between every device (at least one).
func NewBuilds[T any](workers int) *Builds[T] {
	return &Builds[T]{sem: make(chan struct{}, max(workers, 1)), done: map[string]*build[T]{}}
}

// Do returns the result of the build named key, running fn only if no other caller has run or is
// running it. A build that failed because its caller's context ended is forgotten, so that the
// next caller builds again rather than inherit a cancellation.
func (b *Builds[T]) Do(ctx context.Context, key string, fn func(context.Context) (T, error)) (T, error) {
	b.mu.Lock()
	if e, ok := b.done[key]; ok {
		b.mu.Unlock()
		select {
		case <-e.ready:
			return e.val, e.err
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
	e := &build[T]{ready: make(chan struct{})}
	b.done[key] = e
	b.order = append(b.order, key)
	for len(b.order) > keepBuilds {
		// Callers still waiting on an evicted build keep their own reference to it.
		delete(b.done, b.order[0])
		b.order = b.order[1:]
	}
	b.mu.Unlock()
	select {
	case b.sem <- struct{}{}:
		e.val, e.err = fn(ctx)
		<-b.sem
	case <-ctx.Done():
		e.err = ctx.Err()
	}
	if ctx.Err() != nil && e.err != nil {
		b.mu.Lock()
		if b.done[key] == e {
			delete(b.done, key)
		}
		b.mu.Unlock()
	}
	close(e.ready)
	return e.val, e.err
}
