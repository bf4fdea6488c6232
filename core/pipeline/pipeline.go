// Package pipeline runs many evaluations: candidates are compiled on CPU workers while the
// device evaluates the previous ones, one at a time (a device never runs two timings at once).
package pipeline

import (
	"context"
	"sync"

	"github.com/kbplatform/kbplatform/core/contract"
)

// Job is one kernel on one task and device.
type Job struct {
	Task   contract.Task
	Kernel contract.Kernel
	Device string
	Label  string // for progress and tables
}

// Outcome is a finished job.
type Outcome struct {
	Index  int
	Job    Job
	Result *contract.Result
}

// Runner schedules jobs on an Evaluator.
type Runner struct {
	Eval *contract.Evaluator
	// CompileWorkers compiles this many candidates ahead of the device. Zero or one with a CPU
	// device means no overlap: compiling next to a CPU timing would disturb it.
	CompileWorkers int
}

// Run evaluates jobs and calls done for each, in job order, as soon as it finishes. Jobs on
// different devices run concurrently; jobs on one device run one after another.
func (r *Runner) Run(ctx context.Context, jobs []Job, done func(Outcome)) {
	compiled := make([]chan *contract.CompileResult, len(jobs))
	for i := range compiled {
		compiled[i] = make(chan *contract.CompileResult, 1)
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
	results := make([]chan *contract.Result, len(jobs))
	for i := range results {
		results[i] = make(chan *contract.Result, 1)
	}
	for _, dev := range order {
		idx := lanes[dev]
		go func() {
			for _, i := range idx {
				var c *contract.CompileResult
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
