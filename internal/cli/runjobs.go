package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/kbplatform/kbplatform/internal/pipeline"
	"github.com/kbplatform/kbplatform/internal/plugins"
	"github.com/kbplatform/kbplatform/internal/record"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/internal/study"
	"github.com/kbplatform/kbplatform/sdk"
)

// jobRun is how runJobs runs a list of evaluations.
type jobRun struct {
	// backend names the static checks a job's kernel gets ("" guesses from the file).
	backend func(pipeline.Job) string
	// devices spreads the jobs over several GPUs when it has more than one.
	devices []string
	models  map[string]string
	// started is called once the static checks are done, with how many jobs go on to run.
	started func(run int)
	// stored is called with each stored record, the rejected ones first (outcome nil for them).
	stored func(o *pipeline.Outcome, ev *store.Evaluation)
}

// runJobs is the one path `eval` and `campaign faults` evaluate through: static checks first (a
// rejected kernel is stored as such and never built; the others carry their findings and flags
// into their records), then the pipeline, each result stored through the record path. It returns
// how many evaluations were run and how many were interrupted (not stored: they say nothing about
// the kernel).
func (a *app) runJobs(st *store.Store, pm *plugins.Manager, target *plugins.Instance, hw *sdk.Hardware, jobs []pipeline.Job, how jobRun) (ran, interrupted int, err error) {
	rec := a.recorder(st, target)
	scr := a.newScreener(pm)
	var run []pipeline.Job
	var runIssues [][]sdk.Issue
	recipes := map[string]*sdk.BuildRecipe{} // by kernel hash: each builds with its backend's recipe
	for _, j := range jobs {
		b := how.backend(j)
		issues := scr.check(b, j.Task, j.Kernel)
		if study.Rejection(issues) == "" {
			run, runIssues = append(run, j), append(runIssues, issues)
			if r := scr.recipe(b, j.Kernel, hw); r != nil {
				recipes[j.Kernel.Hash] = r
			}
			continue
		}
		ev, err := rec.Record(a.ctx, record.Attempt{Task: j.Task, Kernel: j.Kernel, Device: j.Device, Config: a.cfg.Contract,
			Result: study.Rejected(j.Task, j.Kernel, j.Device, issues), Issues: issues})
		if err != nil {
			return 0, 0, fmt.Errorf("storing results: %w", err)
		}
		how.stored(nil, ev)
	}
	how.started(len(run))
	ev := pipeline.Target{Target: target.Target(), Config: a.cfg.Contract, Progress: a.progressSince(time.Now())}
	runner := &pipeline.Runner{Eval: recipeTarget{ev, recipes}, CompileWorkers: a.cfg.CompileWorkers}
	if len(how.devices) > 1 {
		runner.Devices, runner.Models = how.devices, how.models
	}
	var storeErr error
	runner.Run(a.ctx, run, func(o pipeline.Outcome) {
		if o.Result != nil {
			study.ApplyFlags(o.Result, runIssues[o.Index])
		}
		ev, err := rec.Record(a.ctx, record.Attempt{Task: o.Job.Task, Kernel: o.Job.Kernel, Device: o.Job.Device, Config: a.cfg.Contract,
			Result: o.Result, Issues: runIssues[o.Index]})
		if errors.Is(err, record.ErrInterrupted) {
			interrupted++
			return
		}
		if err != nil && storeErr == nil {
			storeErr = err
		}
		if ev != nil {
			how.stored(&o, ev)
		}
	})
	if storeErr != nil {
		return len(run), interrupted, fmt.Errorf("storing results: %w", storeErr)
	}
	return len(run), interrupted, nil
}
