// Package pipeline runs many evaluations: candidates are compiled on CPU workers while the
// device evaluates the previous ones, one at a time (a device never runs two timings at once).
package pipeline

import (
	"context"
	"fmt"
	"sync"

	"github.com/kbplatform/kbplatform/sdk"
)

// Evaluator compiles and evaluates; the local contract and a target plugin both serve.
type Evaluator interface {
	Compile(ctx context.Context, t sdk.Task, k sdk.Kernel, device string) *sdk.CompileResult
	Evaluate(ctx context.Context, t sdk.Task, k sdk.Kernel, device string, compiled *sdk.CompileResult) *sdk.Result
}

// Target adapts a target plugin to Evaluator: a failure of the plugin itself (a crash, a hang)
// becomes a result with verdict error, so that it can never read as a verdict about the kernel.
type Target struct {
	Target   sdk.Target
	Config   sdk.Config
	Recipe   *sdk.BuildRecipe
	Progress sdk.Progress
}

// Compile asks the target to build the candidate.
func (t Target) Compile(ctx context.Context, task sdk.Task, k sdk.Kernel, device string) *sdk.CompileResult {
	c, err := t.Target.Compile(ctx, sdk.CompileRequest{Task: task, Kernel: k, Device: device, Recipe: t.Recipe})
	if err != nil {
		return &sdk.CompileResult{ErrorClass: sdk.ClassHarness, Message: "target: " + err.Error()}
	}
	return c
}

// Evaluate runs the contract on the target.
func (t Target) Evaluate(ctx context.Context, task sdk.Task, k sdk.Kernel, device string, compiled *sdk.CompileResult) *sdk.Result {
	res, err := t.Target.Evaluate(ctx, sdk.EvaluateRequest{Task: task, Kernel: k, Device: device, Config: t.Config, Compiled: compiled, Recipe: t.Recipe}, t.Progress)
	if err == nil && res != nil {
		res.Task.Source, res.Kernel.Source = task.Source, k.Source
		return res
	}
	res = &sdk.Result{Task: task, Kernel: k, Device: device, Verdict: sdk.VerdictError, ErrorClass: sdk.ClassHarness, Phase: "target", Config: t.Config}
	if ctx.Err() != nil {
		res.ErrorClass, res.Phase = sdk.ClassInterrupted, "interrupted"
	}
	if err != nil {
		res.Message = fmt.Sprintf("the target failed: %v", err)
	} else {
		res.Message = "the target returned no result"
	}
	return res
}

// Job is one kernel on one task and device.
type Job struct {
	Task   sdk.Task
	Kernel sdk.Kernel
	Device string
	Label  string // for progress and tables
}

// Outcome is a finished job.
type Outcome struct {
	Index  int
	Job    Job
	Result *sdk.Result
}

// Runner schedules jobs on an Evaluator.
type Runner struct {
	Eval Evaluator
	// CompileWorkers compiles this many candidates ahead of the device. Zero or one with a CPU
	// device means no overlap: compiling next to a CPU timing would disturb it.
	CompileWorkers int
}

// Run evaluates jobs and calls done for each, in job order, as soon as it finishes. Jobs on
// different devices run concurrently; jobs on one device run one after another.
func (r *Runner) Run(ctx context.Context, jobs []Job, done func(Outcome)) {
	compiled := make([]chan *sdk.CompileResult, len(jobs))
	for i := range compiled {
		compiled[i] = make(chan *sdk.CompileResult, 1)
	}
	overlap := r.CompileWorkers > 1
	for _, j := range jobs {
		if j.Device == "cpu" {
			overlap = false
		}
	}
	if overlap {
		next := make(chan int)
		var wg sync.WaitGroup
		for w := 0; w < r.CompileWorkers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					compiled[i] <- r.Eval.Compile(ctx, jobs[i].Task, jobs[i].Kernel, jobs[i].Device)
				}
			}()
		}
		go func() {
			defer close(next)
			for i := range jobs {
				select {
				case next <- i:
				case <-ctx.Done():
					return
				}
			}
		}()
		defer wg.Wait()
	}

	// One evaluation lane per device, each in job order.
	lanes := map[string][]int{}
	var order []string
	for i, j := range jobs {
		if _, ok := lanes[j.Device]; !ok {
			order = append(order, j.Device)
		}
		lanes[j.Device] = append(lanes[j.Device], i)
	}
	results := make([]chan *sdk.Result, len(jobs))
	for i := range results {
		results[i] = make(chan *sdk.Result, 1)
	}
	for _, dev := range order {
		idx := lanes[dev]
		go func() {
			for _, i := range idx {
				var c *sdk.CompileResult
				if overlap {
					select {
					case c = <-compiled[i]:
					case <-ctx.Done():
					}
				}
				results[i] <- r.Eval.Evaluate(ctx, jobs[i].Task, jobs[i].Kernel, jobs[i].Device, c)
			}
		}()
	}
	for i := range jobs {
		res := <-results[i]
		done(Outcome{Index: i, Job: jobs[i], Result: res})
	}
}
