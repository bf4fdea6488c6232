package contract

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestReferenceProcessesAreBounded checks that a run over many tasks keeps only a few reference
// processes alive per device: one per task would hold the whole gpu-size suite's memory at once
// during a baseline of every task.
func TestReferenceProcessesAreBounded(t *testing.T) {
	e := newEvaluator(t, nil)
	base := loadTask(t, "scale_relu")
	limit := liveReferences("cpu")
	var procs []*proc
	for i := range limit + 2 {
		task := base
		task.ID = fmt.Sprintf("%s-%d", base.ID, i)
		task.Hash = fmt.Sprintf("%s-%d", base.Hash, i)
		if v := e.Validate(context.Background(), task, "cpu"); !v.OK {
			t.Fatalf("task %d: %v", i, v.Errors)
		}
		e.mu.Lock()
		r := e.refs[e.refKey(task, "cpu", "eager")]
		e.mu.Unlock()
		if r == nil {
			t.Fatalf("task %d: no reference process cached", i)
		}
		if r.users != 0 {
			t.Fatalf("task %d: reference still counted as in use (%d) after Validate", i, r.users)
		}
		procs = append(procs, r.p)
	}
	e.mu.Lock()
	n := len(e.refs)
	e.mu.Unlock()
	if n != limit {
		t.Fatalf("%d reference processes cached, want %d", n, limit)
	}
	// The two least recently used are gone, processes and all; the newest are alive.
	for i, p := range procs {
		if i < 2 && !waitExited(p, 10*time.Second) {
			t.Errorf("reference %d was evicted but its process is still running", i)
		}
		if i >= 2 && p.exited() {
			t.Errorf("reference %d is cached but its process has exited", i)
		}
	}
	// A task seen again reuses its process (no new one, none evicted).
	again := base
	again.ID, again.Hash = fmt.Sprintf("%s-%d", base.ID, limit+1), fmt.Sprintf("%s-%d", base.Hash, limit+1)
	if v := e.Validate(context.Background(), again, "cpu"); !v.OK {
		t.Fatal(v.Errors)
	}
	e.mu.Lock()
	same := e.refs[e.refKey(again, "cpu", "eager")].p == procs[limit+1]
	e.mu.Unlock()
	if !same {
		t.Error("the newest task's reference process was not reused")
	}
}

// TestBusyReferenceIsNotEvicted checks that eviction passes over a reference process in use and
// ends it once it is handed back.
func TestBusyReferenceIsNotEvicted(t *testing.T) {
	e := newEvaluator(t, nil)
	base := loadTask(t, "scale_relu")
	variant := func(i int) Task {
		task := base
		task.ID, task.Hash = fmt.Sprintf("%s-busy-%d", base.ID, i), fmt.Sprintf("%s-busy-%d", base.Hash, i)
		return task
	}
	busy, err := e.reference(context.Background(), variant(0), "cpu", "eager")
	if err != nil {
		t.Fatal(err)
	}
	limit := liveReferences("cpu")
	for i := 1; i <= limit; i++ {
		if v := e.Validate(context.Background(), variant(i), "cpu"); !v.OK {
			t.Fatalf("task %d: %v", i, v.Errors)
		}
	}
	if busy.p.exited() {
		t.Fatal("a reference process in use was ended")
	}
	e.mu.Lock()
	n := len(e.refs)
	_, oldestIdle := e.refs[e.refKey(variant(1), "cpu", "eager")]
	e.mu.Unlock()
	if n != limit || oldestIdle {
		t.Fatalf("%d reference processes cached (oldest idle one kept: %v), want %d with it gone", n, oldestIdle, limit)
	}
	// Handed back, it is the least recently used: the next new task ends it.
	e.release(busy)
	if v := e.Validate(context.Background(), variant(limit+1), "cpu"); !v.OK {
		t.Fatal(v.Errors)
	}
	if !waitExited(busy.p, 10*time.Second) {
		t.Error("the least recently used reference was not ended once handed back")
	}
}

func waitExited(p *proc, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if p.exited() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p.exited()
}

// Evaluations called at once on one device (a strategy evaluating samples in parallel) run one
// after the other: they share the task's reference process, which serves one caller at a time,
// and neither is timed next to the other.
func TestConcurrentEvaluationsShareTheDevice(t *testing.T) {
	e := newEvaluator(t, nil)
	task := loadTask(t, "scale_relu")
	kernel := loadKernel(t, "honest_torch")
	var wg sync.WaitGroup
	results := make([]*Result, 3)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.Evaluate(context.Background(), task, kernel, "cpu", nil)
		}()
	}
	wg.Wait()
	for i, res := range results {
		if res.Verdict != Pass {
			t.Errorf("evaluation %d: %s %s: %s", i, res.Verdict, res.ErrorClass, res.Message)
		}
	}
	// One ran at a time: their spans do not overlap.
	slices.SortFunc(results, func(a, b *Result) int { return a.StartedAt.Compare(b.StartedAt) })
	for i := 1; i < len(results); i++ {
		if results[i].StartedAt.Before(results[i-1].FinishedAt) {
			t.Errorf("evaluations %d and %d overlapped on the device", i-1, i)
		}
	}
}

// A validation runs the task's reference on the device and may share the reference process of
// an evaluation: it waits for the device's slot like an evaluation does.
func TestValidationWaitsForTheDevice(t *testing.T) {
	e := newEvaluator(t, nil)
	task := loadTask(t, "scale_relu")
	giveBack, err := e.takeDevice(context.Background(), "cpu") // an evaluation holds the device
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if v := e.Validate(ctx, task, "cpu"); v.OK || len(v.Errors) == 0 || !strings.Contains(v.Errors[0], "waiting for cpu") {
		t.Fatalf("a validation ran while the device was held: %+v", v)
	}
	done := make(chan *Validation)
	go func() { done <- e.Validate(context.Background(), task, "cpu") }()
	select {
	case v := <-done:
		t.Fatalf("a validation finished while the device was held: %+v", v)
	case <-time.After(time.Second):
	}
	giveBack()
	if v := <-done; !v.OK {
		t.Fatalf("validation once the device was free: %+v", v)
	}
}

// TestCandidateStartsBesideReference checks the setting that lets a candidate's hello run beside a
// new reference's start: the device's first reference says whether outputs travel by CUDA IPC,
// later evaluations reuse that, and a reference that says otherwise (the driver changed under a
// running evaluator) ends the evaluation as a harness error instead of letting the candidate send
// outputs the reference cannot read.
func TestCandidateStartsBesideReference(t *testing.T) {
	e := newEvaluator(t, func(c *Config) { c.Seeds, c.TimedCalls, c.CheckCalls = 1, 5, 1 })
	k := loadKernel(t, "honest_torch")
	first := loadTask(t, "scale_relu")
	if _, ok := e.knownIPC("cpu"); ok {
		t.Fatal("IPC support known before any reference started")
	}
	if res := e.Evaluate(context.Background(), first, k, "cpu", nil); res.Verdict != Pass {
		t.Fatalf("first task: %s %s %s", res.Verdict, res.ErrorClass, res.Message)
	}
	if ipc, ok := e.knownIPC("cpu"); !ok || ipc {
		t.Fatalf("after the first reference: ipc %v known %v, want false known", ipc, ok)
	}
	// A second task starts a new reference; the candidate's hello runs beside it.
	second := first
	second.ID, second.Hash = first.ID+"-2", first.Hash+"-2"
	if res := e.Evaluate(context.Background(), second, k, "cpu", nil); res.Verdict != Pass {
		t.Fatalf("second task: %s %s %s", res.Verdict, res.ErrorClass, res.Message)
	}
	e.mu.Lock()
	e.ipc["cpu"] = true
	e.mu.Unlock()
	third := first
	third.ID, third.Hash = first.ID+"-3", first.Hash+"-3"
	res := e.Evaluate(context.Background(), third, k, "cpu", nil)
	if res.Verdict != VerdictError || res.ErrorClass != ClassHarness || !strings.Contains(res.Message, "CUDA IPC") {
		t.Fatalf("reference disagreeing with the device's IPC support: %s %s %q, want a harness error", res.Verdict, res.ErrorClass, res.Message)
	}
	// The next evaluation goes by what the last reference said.
	if res := e.Evaluate(context.Background(), third, k, "cpu", nil); res.Verdict != Pass {
		t.Fatalf("after the disagreement: %s %s %s", res.Verdict, res.ErrorClass, res.Message)
	}
}
