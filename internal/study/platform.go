package study

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/kbplatform/kbplatform/internal/gateway"
	"github.com/kbplatform/kbplatform/internal/placement"
	"github.com/kbplatform/kbplatform/internal/record"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

// lane is the devices of one target that a study evaluates on: each runs one evaluation at a
// time, so that no timing shares its device with another (honest timing), and a task goes back to
// the device that holds its reference process (internal/placement). Compiling ahead happens
// outside the devices' turns on a GPU, one build per candidate and GPU model shared by every
// device; on a CPU the build would disturb the timing next to it, so it happens inside.
type lane struct {
	sched        *placement.Scheduler
	builds       *placement.Builds[*sdk.CompileResult]
	compileAhead bool
	models       map[string]string // device → GPU model: a build is handed only to its model
}

// newLane makes the lane of devices (at least one), building ahead with compileWorkers workers
// shared by all of them when compileAhead.
func newLane(devices []string, models map[string]string, compileAhead bool, compileWorkers int) (*lane, error) {
	sched, err := placement.New(devices)
	if err != nil {
		return nil, err
	}
	return &lane{sched: sched, builds: placement.NewBuilds[*sdk.CompileResult](compileWorkers), compileAhead: compileAhead, models: models}, nil
}

func (l *lane) model(dev string) string {
	if m, ok := l.models[dev]; ok {
		return m
	}
	return dev
}

// runPlatform is the Platform a strategy sees during the run of one unit (an arm on a task).
type runPlatform struct {
	*hostPlatform
	study    string
	task     sdk.Task
	spec     Spec
	arm      Arm
	armKey   string
	hw       *sdk.Hardware
	recipe   *sdk.BuildRecipe
	model    *gateway.Gateway
	backend  sdk.Backend
	target   sdk.Target
	lane     *lane
	progress func(string)
	meter    *meter

	mu      sync.Mutex
	pending []string // calls made since the last recorded attempt
	// asked is the request of the last generation since the last recorded attempt: an attempt
	// recorded without its prompt gets it.
	asked *sdk.GenerateRequest
}

func (p *runPlatform) Prompt(ctx context.Context, variant, feedback string, history []sdk.Message) ([]sdk.Message, error) {
	return p.backend.Prompt(ctx, sdk.PromptRequest{Task: p.task, Variant: variant, Hardware: p.hw, Feedback: feedback, History: history})
}

func (p *runPlatform) Extract(ctx context.Context, text string) (string, error) {
	return p.backend.Extract(ctx, text)
}

func (p *runPlatform) Generate(ctx context.Context, req sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	if req.N < 1 {
		req.N = 1
	}
	if err := p.meter.generate(req.N); err != nil {
		return nil, err
	}
	req.TaskID = p.task.ID
	p.mu.Lock()
	p.asked = &req
	p.mu.Unlock()
	arm := ""
	if !p.spec.legacy() {
		arm = p.armKey
	}
	resp, err := p.model.Generate(ctx, gateway.Call{Study: p.study, Task: p.task.ID, Strategy: p.arm.Strategy.Label(), Arm: arm}, req)
	if err == nil {
		p.meter.spent(resp.Usage, p.model.Price(resp))
	}
	var ce *gateway.CallError
	p.mu.Lock()
	switch {
	case err == nil:
		p.pending = append(p.pending, resp.CallIDs...)
	case errors.As(err, &ce):
		p.pending = append(p.pending, ce.ID)
	}
	p.mu.Unlock()
	return resp, err
}

func (p *runPlatform) Evaluate(ctx context.Context, source, name string) (*sdk.Evaluation, error) {
	n, err := p.meter.evaluate()
	if err != nil {
		return nil, err
	}
	issues, err := p.backend.Check(ctx, source, p.task)
	if err != nil {
		return nil, fmt.Errorf("static checks: %w", err)
	}
	h := sha256.Sum256([]byte(source))
	label := name
	if label == "" {
		label = fmt.Sprintf("evaluation %d", n)
	}
	k := sdk.Kernel{Hash: hex.EncodeToString(h[:]), Source: source, Name: fmt.Sprintf("study %s %s: %s", p.study[:8], p.task.ID, label)}
	var res *sdk.Result
	device := p.spec.Device
	if Rejection(issues) != "" {
		// Rejected by the backend's rules: no build, no device time.
		res = Rejected(p.task, k, p.spec.Device, issues)
		p.progress("    rejected by static checks: " + firstLine(res.Message))
	} else {
		res, device, err = p.evaluate(ctx, k)
		if err == nil && res != nil {
			ApplyFlags(res, issues)
		}
	}
	rec := &record.Recorder{Store: p.store, Target: p.arm.Target.Ref, Validator: p.target}
	ev, rerr := rec.Record(ctx, record.Attempt{Task: p.task, Kernel: k, Device: device, Config: p.spec.Contract, Result: res, Err: err,
		Study: p.study, Model: p.arm.Model.Label(), Arm: p.armKey, Issues: issues})
	if errors.Is(rerr, record.ErrInterrupted) {
		return nil, fmt.Errorf("%w: the evaluation was interrupted", context.Canceled)
	}
	if rerr != nil {
		return nil, rerr
	}
	if err != nil {
		// Stored as the platform's failure; the strategy cannot go on without its target.
		return nil, fmt.Errorf("target (evaluation %s, no verdict): %w", ev.ID[:12], err)
	}
	res = ev.Result
	return &sdk.Evaluation{ID: ev.ID, Result: res, Issues: issues}, nil
}

// evaluate builds the kernel ahead of the devices where that is honest (a GPU), then runs the
// contract on a device of the lane, with that device to itself. It returns the device it ran on
// (the spec's device when it never got one).
func (p *runPlatform) evaluate(ctx context.Context, k sdk.Kernel) (*sdk.Result, string, error) {
	devices := p.lane.sched.Devices()
	var compiled *sdk.CompileResult
	builtOn := devices[0]
	if p.lane.compileAhead {
		// One build per candidate, task, recipe and GPU model, whichever device runs it.
		key := strings.Join([]string{p.task.ID, p.task.Size, k.Hash, refKey(p.arm.Backend), p.lane.model(builtOn)}, "\x00")
		c, err := p.lane.builds.Do(ctx, key, func(ctx context.Context) (*sdk.CompileResult, error) {
			return p.target.Compile(ctx, sdk.CompileRequest{Task: p.task, Kernel: k, Device: builtOn, Recipe: p.recipe})
		})
		if err == nil {
			compiled = c // else the evaluation builds it and reports what fails
		}
	}
	dev, release, err := p.lane.sched.Acquire(ctx, p.task.ID+"\x00"+p.task.Size)
	if err != nil {
		return nil, p.spec.Device, err
	}
	defer release()
	if compiled != nil && p.lane.model(dev) != p.lane.model(builtOn) {
		compiled = nil // built for another GPU model: the evaluation builds its own
	}
	res, err := p.target.Evaluate(ctx, sdk.EvaluateRequest{Task: p.task, Kernel: k, Device: dev, Config: p.spec.Contract,
		Recipe: p.recipe, Compiled: compiled}, func(m string) { p.progress("    " + m) })
	return res, dev, err
}

// Record stores an attempt under the unit's arm and links the model calls behind it: those the
// strategy names, else every call made since the previous attempt (a strategy that knows nothing
// of call ids, or a generation that failed, still gets its calls linked).
func (p *runPlatform) Record(_ context.Context, a sdk.Attempt) (string, error) {
	p.mu.Lock()
	if len(a.CallIDs) == 0 {
		a.CallIDs = p.pending
	}
	p.pending = nil
	// The trajectory keeps every prompt: one a strategy did not record is the one it last sent.
	if len(a.Prompt) == 0 && p.asked != nil {
		a.Prompt = p.asked.Messages
		if a.Temperature == 0 && p.asked.Params.Temperature != nil {
			a.Temperature = *p.asked.Params.Temperature
		}
	}
	p.asked = nil
	p.mu.Unlock()
	model, backend, strategy, target := p.arm.Parts()
	rec := &store.AttemptRecord{Study: p.study, Task: p.task.ID, Model: model, Arm: p.armKey, Backend: backend, Strategy: strategy,
		Target: target, Seed: p.arm.Seed, Attempt: a}
	if err := p.store.PutAttempt(rec); err != nil {
		return "", err
	}
	if err := p.store.LinkCalls(p.study, a.CallIDs, rec.ID); err != nil {
		return "", err
	}
	return rec.ID, nil
}
