package placement

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every device asks for the same candidates at once: each is built once, and no more builds run
// at a time than there are workers.
func TestBuildsOncePerKey(t *testing.T) {
	b := NewBuilds[string](2)
	var built, running, peak atomic.Int32
	var wg sync.WaitGroup
	for dev := range 8 {
		for k := range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("src%d|flags", k)
				got, err := b.Do(context.Background(), key, func(context.Context) (string, error) {
					built.Add(1)
					r := running.Add(1)
					for {
						p := peak.Load()
						if r <= p || peak.CompareAndSwap(p, r) {
							break
						}
					}
					time.Sleep(2 * time.Millisecond)
					running.Add(-1)
					return "binary of " + key, nil
				})
				if err != nil || got != "binary of "+key {
					t.Errorf("device %d, %s: %q, %v", dev, key, got, err)
				}
			}()
		}
	}
	wg.Wait()
	if built.Load() != 5 {
		t.Fatalf("%d builds for 5 candidates on 8 devices", built.Load())
	}
	if peak.Load() > 2 {
		t.Fatalf("%d builds at once with 2 workers", peak.Load())
	}
}

// A build given up by a cancelled caller is built again by the next one.
func TestBuildsForgetsCancelled(t *testing.T) {
	b := NewBuilds[int](1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Do(ctx, "k", func(ctx context.Context) (int, error) { return 0, ctx.Err() }); err == nil {
		t.Fatal("a cancelled build returned no error")
	}
	got, err := b.Do(context.Background(), "k", func(context.Context) (int, error) { return 7, nil })
	if err != nil || got != 7 {
		t.Fatalf("rebuild: %d, %v", got, err)
	}
}
