package placement

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeHost runs evaluations on N logical devices and checks that none runs two at once.
type fakeHost struct {
	mu      sync.Mutex
	running map[string]int
	overlap []string
	peak    int // most devices busy at once
	busy    int
}

func (h *fakeHost) eval(t *testing.T, d string, dur time.Duration) {
	h.mu.Lock()
	h.running[d]++
	if h.running[d] > 1 {
		h.overlap = append(h.overlap, d)
	}
	h.busy++
	h.peak = max(h.peak, h.busy)
	h.mu.Unlock()
	time.Sleep(dur)
	h.mu.Lock()
	h.running[d]--
	h.busy--
	h.mu.Unlock()
}

func devices(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("cuda:%d", i))
	}
	return out
}

func TestNewRefusesBadLists(t *testing.T) {
	for _, tc := range []struct {
		name string
		devs []string
	}{{"empty", nil}, {"twice", []string{"cuda:0", "cuda:0"}}, {"blank", []string{""}}} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.devs); err == nil {
				t.Fatalf("New(%q) accepted", tc.devs)
			}
		})
	}
}

// Units of a study: each task evaluates several times in a row (a strategy's loop), all units at
// once. Every device must be used, none twice at once, and a task must stay on its device.
func TestUnitsSpreadAndStick(t *testing.T) {
	for _, n := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprintf("%d devices", n), func(t *testing.T) {
			s, err := New(devices(n))
			if err != nil {
				t.Fatal(err)
			}
			h := &fakeHost{running: map[string]int{}}
			const evalsPerTask = 5
			used := make([]map[string]int, n)
			var wg sync.WaitGroup
			for task := range n {
				used[task] = map[string]int{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range evalsPerTask {
						d, release, err := s.Acquire(context.Background(), fmt.Sprintf("task%d", task))
						if err != nil {
							t.Error(err)
							return
						}
						used[task][d]++
						h.eval(t, d, 2*time.Millisecond)
						release()
						time.Sleep(time.Millisecond) // the model call between evaluations
					}
				}()
			}
			wg.Wait()
			if len(h.overlap) > 0 {
				t.Fatalf("two evaluations at once on %v", h.overlap)
			}
			runs := s.Runs()
			if len(runs) != n {
				t.Fatalf("devices used: %v, want all %d", runs, n)
			}
			for task, u := range used {
				if len(u) != 1 {
					t.Errorf("task%d ran on %v; with a device per task it should stay on one", task, u)
				}
			}
			if h.peak != n {
				t.Errorf("at most %d devices were busy at once, want %d", h.peak, n)
			}
		})
	}
}

// More tasks than devices, each task's evaluations queued at once (an eval batch): the devices
// are all used and a device never idles while work waits.
func TestBatchKeepsEveryDeviceBusy(t *testing.T) {
	const n, tasks, each = 4, 6, 4
	s, _ := New(devices(n))
	h := &fakeHost{running: map[string]int{}}
	var wg sync.WaitGroup
	var done atomic.Int32
	start := time.Now()
	for i := range tasks * each {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, release, err := s.Acquire(context.Background(), fmt.Sprintf("task%d", i%tasks))
			if err != nil {
				t.Error(err)
				return
			}
			h.eval(t, d, 5*time.Millisecond)
			release()
			done.Add(1)
		}()
	}
	wg.Wait()
	if len(h.overlap) > 0 {
		t.Fatalf("two evaluations at once on %v", h.overlap)
	}
	if h.peak != n {
		t.Fatalf("at most %d of %d devices were busy at once", h.peak, n)
	}
	// 24 evaluations of 5 ms on 4 devices: 30 ms if the devices share the work; one device alone
	// would need 120 ms.
	if el := time.Since(start); el > 100*time.Millisecond {
		t.Errorf("the batch took %v: the work was not spread", el)
	}
	if done.Load() != tasks*each {
		t.Fatalf("%d evaluations finished, want %d", done.Load(), tasks*each)
	}
}

// A device that frees up goes to the waiter whose task it holds, even if an older waiter
// (of a new task) is in the queue; the older waiter gets the next device.
func TestFreedDevicePrefersItsTask(t *testing.T) {
	s, _ := New(devices(2))
	ctx := context.Background()
	d0, rel0, _ := s.Acquire(ctx, "a") // a → one device
	d1, rel1, _ := s.Acquire(ctx, "b") // b → the other
	if d0 == d1 {
		t.Fatalf("a and b share %s while another device is idle", d0)
	}
	got := make(chan string, 2)
	go func() { d, r, _ := s.Acquire(ctx, "new"); got <- "new=" + d; r() }()
	waitQueued(t, s, 1)
	go func() { d, r, _ := s.Acquire(ctx, "b"); got <- "b=" + d; time.Sleep(time.Millisecond); r() }()
	waitQueued(t, s, 2)
	rel1() // b's device frees: b's second evaluation takes it, not the older "new"
	if g := <-got; g != "b="+d1 {
		t.Fatalf("first grant %s, want b=%s", g, d1)
	}
	rel0()
	if g := <-got; g != "new="+d0 {
		t.Fatalf("second grant %s, want new=%s", g, d0)
	}
}

// A task whose device is busy takes an idle one rather than leave it idle.
func TestBusyHomeDoesNotIdleOthers(t *testing.T) {
	s, _ := New(devices(2))
	ctx := context.Background()
	d0, rel0, _ := s.Acquire(ctx, "a")
	defer rel0()
	d1, rel1, err := s.Acquire(ctx, "a")
	if err != nil || d1 == d0 {
		t.Fatalf("second evaluation of a: %s, %v; want the idle device", d1, err)
	}
	rel1()
	if h := s.Holds("a"); len(h) != 2 {
		t.Fatalf("a is held on %v, want both devices", h)
	}
}

// A new task goes to the idle device holding the fewest tasks.
func TestNewTaskOnLeastLoaded(t *testing.T) {
	s, _ := New(devices(3))
	ctx := context.Background()
	for _, task := range []string{"a", "b", "c"} {
		_, r, _ := s.Acquire(ctx, task)
		r()
	}
	// Each device holds one task now: b's next evaluation goes back to b's device.
	d, r, _ := s.Acquire(ctx, "b")
	if want := s.Holds("b")[0]; d != want {
		t.Fatalf("b went to %s, want %s that holds it", d, want)
	}
	r()
	used := map[string]bool{}
	for _, task := range []string{"a", "b", "c"} {
		used[s.Holds(task)[0]] = true
	}
	if len(used) != 3 {
		t.Fatalf("three tasks on %d devices, want 3", len(used))
	}
}

func TestAcquireCancelled(t *testing.T) {
	s, _ := New(devices(1))
	_, rel, _ := s.Acquire(context.Background(), "a")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, _, err := s.Acquire(ctx, "b"); err == nil {
		t.Fatal("acquired a busy device")
	}
	rel()
	rel() // a second release is harmless
	d, rel2, err := s.Acquire(context.Background(), "c")
	if err != nil || d != "cuda:0" {
		t.Fatalf("after a cancelled waiter: %s, %v", d, err)
	}
	rel2()
}

func waitQueued(t *testing.T, s *Scheduler, n int) {
	t.Helper()
	for range 1000 {
		s.mu.Lock()
		q := len(s.waiting)
		s.mu.Unlock()
		if q >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%d waiters never queued", n)
}
