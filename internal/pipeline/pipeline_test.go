package pipeline

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
)

// fakeEval stands in for a target on a host of logical devices: it records every compile and
// which devices run an evaluation at once.
type fakeEval struct {
	mu       sync.Mutex
	compiles map[string]int // kernel hash → builds
	running  map[string]int
	overlap  []string
	handed   map[string]bool // evaluations (task/kernel@device) that got a build from the pipeline
	evalDur  time.Duration
}

func newFake(d time.Duration) *fakeEval {
	return &fakeEval{compiles: map[string]int{}, running: map[string]int{}, handed: map[string]bool{}, evalDur: d}
}

func (f *fakeEval) Compile(_ context.Context, t sdk.Task, k sdk.Kernel, device string) *sdk.CompileResult {
	f.mu.Lock()
	f.compiles[t.ID+"/"+k.Hash]++
	f.mu.Unlock()
	return &sdk.CompileResult{OK: true, Log: "built on " + device}
}

func (f *fakeEval) Evaluate(_ context.Context, t sdk.Task, k sdk.Kernel, device string, c *sdk.CompileResult) *sdk.Result {
	f.mu.Lock()
	f.running[device]++
	if f.running[device] > 1 {
		f.overlap = append(f.overlap, device)
	}
	f.handed[t.ID+"/"+k.Hash+"@"+device] = c != nil
	f.mu.Unlock()
	time.Sleep(f.evalDur)
	f.mu.Lock()
	f.running[device]--
	f.mu.Unlock()
	return &sdk.Result{Task: t, Kernel: k, Device: device, Verdict: sdk.Pass}
}

func batch(tasks, kernels int) []Job {
	var jobs []Job
	for k := range kernels {
		for t := range tasks {
			jobs = append(jobs, Job{Task: sdk.Task{ID: fmt.Sprintf("task%d", t), Size: "small"},
				Kernel: sdk.Kernel{Hash: fmt.Sprintf("k%d", k)}, Device: "cuda:9"})
		}
	}
	return jobs
}

func TestRunPlacesOnEveryDevice(t *testing.T) {
	devs := []string{"cuda:0", "cuda:1", "cuda:2", "cuda:3"}
	models := map[string]string{"cuda:0": "H200", "cuda:1": "H200", "cuda:2": "H200", "cuda:3": "H200"}
	f := newFake(3 * time.Millisecond)
	r := &Runner{Eval: f, CompileWorkers: 3, Devices: devs, Models: models}
	jobs := append(batch(4, 6), batch(4, 6)...) // every kernel twice: built once
	var got []Outcome
	r.Run(context.Background(), jobs, func(o Outcome) { got = append(got, o) })
	if len(got) != len(jobs) {
		t.Fatalf("%d outcomes for %d jobs", len(got), len(jobs))
	}
	used := map[string]int{}
	byTask := map[string]map[string]bool{}
	for i, o := range got {
		if o.Index != i {
			t.Fatalf("outcome %d came as %d: not in job order", i, o.Index)
		}
		if o.Job.Device != o.Result.Device || o.Job.Device == "cuda:9" {
			t.Fatalf("outcome %d: job on %q, result on %q; want a placed device", i, o.Job.Device, o.Result.Device)
		}
		used[o.Job.Device]++
		if byTask[o.Job.Task.ID] == nil {
			byTask[o.Job.Task.ID] = map[string]bool{}
		}
		byTask[o.Job.Task.ID][o.Job.Device] = true
	}
	if len(f.overlap) > 0 {
		t.Fatalf("two evaluations at once on %v", f.overlap)
	}
	if len(used) != len(devs) {
		t.Fatalf("devices used %v, want all of %v", used, devs)
	}
	// Four tasks on four devices, all jobs of a kind taking the same time: most of a task's jobs
	// go back to the device holding its reference.
	moved := 0
	for _, ds := range byTask {
		moved += len(ds) - 1
	}
	if moved > len(jobs)/4 {
		t.Errorf("tasks spread over %v: %d moves for %d jobs", byTask, moved, len(jobs))
	}
	for k, n := range f.compiles {
		if n != 1 {
			t.Errorf("%s built %d times", k, n)
		}
	}
	for e, had := range f.handed {
		if !had {
			t.Errorf("%s was not handed its build although every device is an H200", e)
		}
	}
}

// A build made on one GPU model is not handed to another model's device.
func TestRunMixedModelsRebuild(t *testing.T) {
	devs := []string{"cuda:0", "cuda:1"}
	f := newFake(2 * time.Millisecond)
	r := &Runner{Eval: f, CompileWorkers: 2, Devices: devs, Models: map[string]string{"cuda:0": "H200", "cuda:1": "A100"}}
	r.Run(context.Background(), batch(2, 4), func(Outcome) {})
	seen := map[string]bool{}
	for e, had := range f.handed {
		dev := e[len(e)-6:]
		seen[dev] = true
		if want := dev == "cuda:0"; had != want {
			t.Errorf("%s handed a build: %v, want %v (built on cuda:0, an H200)", e, had, want)
		}
	}
	if len(seen) != 2 {
		t.Fatalf("devices used: %v", seen)
	}
}

// Without Devices every job runs on its own device, one at a time per device.
func TestRunFixedDevices(t *testing.T) {
	f := newFake(time.Millisecond)
	jobs := batch(2, 3)
	for i := range jobs {
		jobs[i].Device = fmt.Sprintf("cuda:%d", i%2)
	}
	r := &Runner{Eval: f, CompileWorkers: 2}
	r.Run(context.Background(), jobs, func(o Outcome) {
		if o.Result.Device != jobs[o.Index].Device {
			t.Errorf("job %d on %s ran on %s", o.Index, jobs[o.Index].Device, o.Result.Device)
		}
	})
	if len(f.overlap) > 0 {
		t.Fatalf("two evaluations at once on %v", f.overlap)
	}
}

// Interrupted while waiting for a device: the job reports it and no evaluation runs.
func TestRunInterrupted(t *testing.T) {
	f := newFake(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	r := &Runner{Eval: f, Devices: []string{"cpu"}}
	interrupted := 0
	r.Run(ctx, batch(1, 4), func(o Outcome) {
		if o.Result.ErrorClass == sdk.ClassInterrupted {
			interrupted++
		}
	})
	if interrupted == 0 {
		t.Fatal("no job reported the interruption")
	}
}
