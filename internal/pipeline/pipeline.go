// Package pipeline runs many evaluations: candidates are compiled on CPU workers while the
// devices evaluate the previous ones, each device one at a time (a device never runs two timings
// at once). Given several devices, it places each job on one (internal/placement).
package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/kbplatform/kbplatform/internal/placement"
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
	// CompileWorkers compiles this many candidates ahead of the devices, shared by all of them.
	// Zero or one with a CPU device means no overlap: compiling next to a CPU timing would
	// disturb it.
	CompileWorkers int
	// Devices, when given, are the devices the jobs are placed on (a job's own Device is then
	// ignored): each runs one evaluation at a time, and a task's jobs go back to the device that
	// holds its reference process. Empty: every job runs on its own Device.
	Devices []string
	// Models names each device's GPU model: a candidate built ahead on one device is handed only
	// to devices of the same model (another model builds it again in its evaluation).
	Models map[string]string
}

// Run evaluates jobs and calls done for each, in job order, as soon as it finishes. Jobs on
// different devices run concurrently; jobs on one device run one after another.
func (r *Runner) Run(ctx context.Context, jobs []Job, done func(Outcome)) {
	placed := len(r.Devices) > 0
	if placed {
		jobs = slices.Clone(jobs)
		for i := range jobs {
			jobs[i].Device = ""
		}
	}
	compiled := make([]chan built, len(jobs))
	for i := range compiled {
		compiled[i] = make(chan built, 1)
	}
	overlap := r.CompileWorkers > 1
	for _, j := range jobs {
		if j.Device == "cpu" {
			overlap = false
		}
	}
	if slices.Contains(r.Devices, "cpu") {
		overlap = false
	}
	if overlap {
		builds := placement.NewBuilds[*sdk.CompileResult](r.CompileWorkers)
		next := make(chan int)
		var wg sync.WaitGroup
		for w := 0; w < r.CompileWorkers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					dev := jobs[i].Device
					if placed {
						dev = r.Devices[0]
					}
					// One build per task, kernel and GPU model, however many jobs repeat it.
					key := strings.Join([]string{jobs[i].Task.ID, jobs[i].Task.Size, jobs[i].Kernel.Hash, r.model(dev)}, "\x00")
					c, _ := builds.Do(ctx, key, func(ctx context.Context) (*sdk.CompileResult, error) {
						return r.Eval.Compile(ctx, jobs[i].Task, jobs[i].Kernel, dev), nil
					})
					compiled[i] <- built{c, dev}
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
	results := make([]chan Outcome, len(jobs))
	for i := range results {
		results[i] = make(chan Outcome, 1)
	}
	// evaluate runs job i on dev with its build, if it was built for dev's model.
	evaluate := func(i int, dev string, b built) {
		c := b.result
		if c != nil && r.model(b.device) != r.model(dev) {
			c = nil
		}
		j := jobs[i]
		j.Device = dev
		results[i] <- Outcome{Index: i, Job: j, Result: r.Eval.Evaluate(ctx, j.Task, j.Kernel, dev, c)}
	}
	wait := func(i int) built {
		if !overlap {
			return built{}
		}
		select {
		case b := <-compiled[i]:
			return b
		case <-ctx.Done():
			return built{}
		}
	}
	if placed {
		sched, err := placement.New(r.Devices)
		if err != nil {
			for i := range jobs {
				results[i] <- Outcome{Index: i, Job: jobs[i], Result: &sdk.Result{Task: jobs[i].Task, Kernel: jobs[i].Kernel,
					Verdict: sdk.VerdictError, ErrorClass: sdk.ClassHarness, Phase: "placement", Message: err.Error()}}
			}
		} else {
			// Jobs queue for devices in job order, each once its build is ready; up to one per device
			// waits besides those running, so that a device that frees up can choose the job whose
			// task it holds.
			window := make(chan struct{}, 2*len(r.Devices))
			go func() {
				for i := range jobs {
					b := wait(i)
					slot := true
					select {
					case window <- struct{}{}:
					case <-ctx.Done():
						slot = false // Wait below returns at once
					}
					ticket := sched.Request(jobs[i].Task.ID + "\x00" + jobs[i].Task.Size)
					go func() {
						if slot {
							defer func() { <-window }()
						}
						dev, release, err := ticket.Wait(ctx)
						if err != nil {
							// Interrupted before it got a device: nothing ran.
							results[i] <- Outcome{Index: i, Job: jobs[i], Result: &sdk.Result{Task: jobs[i].Task, Kernel: jobs[i].Kernel,
								Verdict: sdk.VerdictError, ErrorClass: sdk.ClassInterrupted, Phase: "interrupted", Message: err.Error()}}
							return
						}
						defer release()
						evaluate(i, dev, b)
					}()
				}
			}()
		}
	} else {
		// One evaluation lane per device, each in job order.
		lanes := map[string][]int{}
		var order []string
		for i, j := range jobs {
			if _, ok := lanes[j.Device]; !ok {
				order = append(order, j.Device)
			}
			lanes[j.Device] = append(lanes[j.Device], i)
		}
		for _, dev := range order {
			idx := lanes[dev]
			go func() {
				for _, i := range idx {
					evaluate(i, dev, wait(i))
				}
			}()
		}
	}
	for i := range jobs {
		done(<-results[i])
	}
}

// built is a job's build and the device it was built on.
type built struct {
	result *sdk.CompileResult
	device string
}

func (r *Runner) model(dev string) string {
	if m, ok := r.Models[dev]; ok {
		return m
	}
	return dev
}
