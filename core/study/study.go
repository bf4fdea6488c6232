// Package study runs studies: tasks × model × backend × strategy × target under a budget, every
// piece a plugin. A study's id is a hash of its spec, and each (study, task) unit is marked done
// only when its strategy run finished, so a restarted study skips what is done and redoes the rest.
package study

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kbplatform/kbplatform/core/plugins"
	"github.com/kbplatform/kbplatform/core/record"
	"github.com/kbplatform/kbplatform/core/registry"
	"github.com/kbplatform/kbplatform/core/store"
	"github.com/kbplatform/kbplatform/sdk"
)

// PluginRef names a plugin and its settings.
type PluginRef struct {
	Ref    string          `json:"ref"` // kind/name
	Config json.RawMessage `json:"config,omitempty"`
}

// Spec describes a study.
type Spec struct {
	Name     string     `json:"name,omitempty"`
	Tasks    []string   `json:"tasks"`
	Size     string     `json:"size"`
	Device   string     `json:"device"`
	Model    PluginRef  `json:"model"`
	Backend  PluginRef  `json:"backend"`
	Strategy PluginRef  `json:"strategy"`
	Target   PluginRef  `json:"target"`
	Budget   sdk.Budget `json:"budget"`
	Seed     int64      `json:"seed"`
	Contract sdk.Config `json:"contract"`
	// ContractVersion is the version of the contract the target runs (its `contract:` capability).
	// It is part of the id: a study under a new contract starts afresh and reuses nothing.
	ContractVersion string `json:"contract_version,omitempty"`
}

// ContractOf reads the contract version a target advertises ("" when it names none).
func ContractOf(hw *sdk.Hardware) string {
	if hw == nil {
		return ""
	}
	for _, c := range hw.Capabilities {
		if v, ok := strings.CutPrefix(c, "contract:"); ok {
			return v
		}
	}
	return ""
}

// ID is a deterministic hash of everything in the spec but its name.
func (s Spec) ID() string {
	c := s
	c.Name = ""
	c.Tasks = append([]string(nil), s.Tasks...)
	sort.Strings(c.Tasks)
	for _, r := range []*PluginRef{&c.Model, &c.Backend, &c.Strategy, &c.Target} {
		r.Config = canonical(r.Config)
	}
	b, _ := json.Marshal(c)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])[:20]
}

// canonical re-encodes JSON with sorted keys so that formatting does not change an id.
func canonical(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	b, _ := json.Marshal(v)
	return b
}

// Deps are what a study run needs.
type Deps struct {
	Store    *store.Store
	Registry *registry.Registry
	Plugins  *plugins.Manager
	Progress func(string)
}

// TaskOutcome is one task's result in a study.
type TaskOutcome struct {
	Task        string  `json:"task"`
	Done        bool    `json:"done"`
	Skipped     bool    `json:"skipped,omitempty"` // done by an earlier run
	Attempts    int     `json:"attempts"`
	Correct     bool    `json:"correct"`
	BestSpeedup float64 `json:"best_speedup,omitempty"`
	BestEval    string  `json:"best_evaluation,omitempty"`
	Error       string  `json:"error,omitempty"`
	// Blame is set when the task has no verdict about any kernel because something else failed
	// (task, platform, environment): such a task counts in no fast_p.
	Blame string `json:"blame,omitempty"`
	// Reason is the strategy's note for a finished task, or why it has no verdict.
	Reason string `json:"reason,omitempty"`
}

// Report summarises a study run.
type Report struct {
	Study    string        `json:"study"`
	Spec     Spec          `json:"spec"`
	Outcomes []TaskOutcome `json:"outcomes"`
}

// Run executes the study; errors of single tasks are reported in their outcome, not returned.
func Run(ctx context.Context, spec Spec, d Deps) (*Report, error) {
	if len(spec.Tasks) == 0 {
		return nil, errors.New("study has no tasks")
	}
	progress := d.Progress
	if progress == nil {
		progress = func(string) {}
	}
	id := spec.ID()
	raw, _ := json.Marshal(spec)
	if err := d.Store.PutStudy(store.Study{ID: id, Name: spec.Name, Spec: raw, CreatedAt: time.Now().UTC()}); err != nil {
		return nil, err
	}
	tasks := make([]sdk.Task, 0, len(spec.Tasks))
	for _, tid := range spec.Tasks {
		t, err := d.Registry.Get(tid)
		if err != nil {
			return nil, err
		}
		ct, err := t.Contract(t.PickSize(spec.Size, spec.Device))
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, ct)
	}

	host := &hostPlatform{store: d.Store}
	target, err := d.Plugins.Start(ctx, spec.Target.Ref, spec.Target.Config, nil)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	backend, err := d.Plugins.Start(ctx, spec.Backend.Ref, spec.Backend.Config, nil)
	if err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	model, err := d.Plugins.Start(ctx, spec.Model.Ref, spec.Model.Config, host)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	strategy, err := d.Plugins.Start(ctx, spec.Strategy.Ref, spec.Strategy.Config, nil)
	if err != nil {
		return nil, fmt.Errorf("strategy: %w", err)
	}
	hw, err := target.Target().Describe(ctx)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	recipe, err := backend.Backend().Recipe(ctx, hw)
	if err != nil {
		return nil, fmt.Errorf("backend recipe: %w", err)
	}

	rep := &Report{Study: id, Spec: spec}
	for i, task := range tasks {
		if ctx.Err() != nil {
			break
		}
		out := TaskOutcome{Task: task.ID}
		done, err := d.Store.UnitDone(id, task.ID)
		if err != nil {
			return nil, err
		}
		if done {
			out.Done, out.Skipped = true, true
			rep.Outcomes = append(rep.Outcomes, out)
			progress(fmt.Sprintf("[%d/%d] %s: done in an earlier run", i+1, len(tasks), task.ID))
			continue
		}
		progress(fmt.Sprintf("[%d/%d] %s: %s with %s", i+1, len(tasks), task.ID, spec.Strategy.Ref, spec.Model.Ref))
		p := &runPlatform{hostPlatform: host, study: id, task: task, spec: spec, hw: hw, recipe: recipe,
			model: model.Model(), backend: backend.Backend(), target: target.Target(), targetName: spec.Target.Ref, progress: progress}
		res, err := strategy.Strategy().Run(ctx, sdk.RunRequest{Task: task, Budget: spec.Budget, Seed: spec.Seed, Study: id}, p)
		if err != nil {
			out.Error = err.Error()
			progress(fmt.Sprintf("[%d/%d] %s: %v", i+1, len(tasks), task.ID, err))
		} else {
			out.Done = true
			if err := d.Store.PutUnit(store.Unit{Study: id, Task: task.ID, Attempts: res.Attempts, BestEvaluation: res.BestEvaluation,
				Note: res.Note, FinishedAt: time.Now().UTC()}); err != nil {
				return nil, err
			}
		}
		rep.Outcomes = append(rep.Outcomes, out)
	}
	if err := Summarize(d.Store, rep); err != nil {
		return nil, err
	}
	return rep, ctx.Err()
}

// Summarize fills each outcome's correctness and best speedup from the stored evaluations.
func Summarize(st *store.Store, rep *Report) error {
	evs, err := st.StudyEvaluations(rep.Study)
	if err != nil {
		return err
	}
	atts, err := st.Attempts(rep.Study, "")
	if err != nil {
		return err
	}
	units, err := st.Units(rep.Study)
	if err != nil {
		return err
	}
	done := map[string]store.Unit{}
	for _, u := range units {
		done[u.Task] = u
	}
	idx := map[string]int{}
	for i := range rep.Outcomes {
		o := &rep.Outcomes[i]
		idx[o.Task] = i
		o.Attempts = 0
		u, ok := done[o.Task]
		o.Done = o.Done || ok
		if ok && o.Reason == "" {
			o.Reason = u.Note
		}
	}
	for _, a := range atts {
		if i, ok := idx[a.Task]; ok {
			rep.Outcomes[i].Attempts++
		}
	}
	judged := map[string]bool{}   // a verdict about some kernel of the task
	blamed := map[string]string{} // the last failure that was not a kernel's, and why
	last := map[string]string{}   // the last verdict about a kernel
	for _, ev := range evs {
		i, ok := idx[ev.Result.Task.ID]
		if !ok {
			continue
		}
		o := &rep.Outcomes[i]
		b := ev.Blame
		if b == "" {
			b = record.BlameOf(ev.Result)
		}
		if b == "" || b == record.BlameKernel {
			judged[o.Task] = true
			last[o.Task] = describe(ev.Result)
		} else {
			o.Blame, blamed[o.Task] = b, ev.Result.ErrorClass+": "+firstLine(ev.Result.Message)
		}
		if ev.Result.Verdict != sdk.Pass || ev.Result.Timing == nil {
			continue
		}
		o.Correct = true
		if ev.Result.Timing.Speedup > o.BestSpeedup {
			o.BestSpeedup, o.BestEval = ev.Result.Timing.Speedup, ev.ID
		}
	}
	for i := range rep.Outcomes {
		o := &rep.Outcomes[i]
		switch {
		case judged[o.Task]:
			o.Blame = ""
			if o.Correct {
				o.Reason = fmt.Sprintf("pass, best %.2fx", o.BestSpeedup)
			} else if o.Reason == "" {
				o.Reason = last[o.Task]
			}
		case o.Blame != "":
			o.Reason = blamed[o.Task]
		case o.Error != "":
			// The strategy or the model failed before any kernel was judged.
			o.Blame, o.Reason = record.BlamePlatform, firstLine(o.Error)
		}
	}
	return nil
}

// describe is a one-line account of a verdict.
func describe(r *sdk.Result) string {
	if r.Verdict == sdk.Pass {
		return "pass"
	}
	d := r.Verdict + " " + r.ErrorClass
	if m := firstLine(r.Message); m != "" {
		d += ": " + m
	}
	return d
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// FastP is KernelBench's fast_p over the outcomes: the fraction of tasks with a correct kernel
// whose speedup over eager exceeds p (fast_0 is the correctness rate). Tasks without a verdict
// about any kernel because the task, the platform or the environment failed (Blame) are left out:
// they say nothing about the model.
func FastP(outcomes []TaskOutcome, p float64) float64 {
	n, total := 0, 0
	for _, o := range outcomes {
		if o.Blame != "" {
			continue
		}
		total++
		if o.Correct && (p <= 0 || o.BestSpeedup > p) {
			n++
		}
	}
	if total == 0 {
		return 0
	}
	return float64(n) / float64(total)
}

// Judged counts the outcomes FastP is computed over.
func Judged(outcomes []TaskOutcome) int {
	n := 0
	for _, o := range outcomes {
		if o.Blame == "" {
			n++
		}
	}
	return n
}

// hostPlatform is what any plugin may ask of the host outside a run: stored kernels.
type hostPlatform struct {
	store *store.Store
}

var errNoRun = fmt.Errorf("%w: only available to a strategy during a run", sdk.ErrUnavailable)

func (h *hostPlatform) Prompt(context.Context, string, string, []sdk.Message) ([]sdk.Message, error) {
	return nil, errNoRun
}
func (h *hostPlatform) Extract(context.Context, string) (string, error) { return "", errNoRun }
func (h *hostPlatform) Generate(context.Context, sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	return nil, errNoRun
}
func (h *hostPlatform) Evaluate(context.Context, string, string) (*sdk.Evaluation, error) {
	return nil, errNoRun
}
func (h *hostPlatform) Record(context.Context, sdk.Attempt) (string, error) { return "", errNoRun }

// Kernels returns the distinct kernels evaluated on a task, newest first.
func (h *hostPlatform) Kernels(_ context.Context, taskID string, limit int) ([]sdk.Kernel, error) {
	evs, err := h.store.Evaluations(store.EvalFilter{Task: taskID})
	if err != nil {
		return nil, err
	}
	var out []sdk.Kernel
	seen := map[string]bool{}
	for _, ev := range evs {
		hsh := ev.Result.Kernel.Hash
		if seen[hsh] || hsh == "" {
			continue
		}
		seen[hsh] = true
		k, err := h.store.Kernel(hsh)
		if err != nil {
			continue // baselines have no stored kernel
		}
		out = append(out, sdk.Kernel{Hash: k.Hash, Source: k.Source, Name: k.Name})
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	return out, nil
}

// runPlatform is the Platform a strategy sees during the run of one task.
type runPlatform struct {
	*hostPlatform
	study      string
	task       sdk.Task
	spec       Spec
	hw         *sdk.Hardware
	recipe     *sdk.BuildRecipe
	model      sdk.Model
	backend    sdk.Backend
	target     sdk.Target
	targetName string
	progress   func(string)
	mu         sync.Mutex
	gens, evs  int
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
	p.mu.Lock()
	if b := p.spec.Budget.Generations; b > 0 && p.gens+req.N > b {
		used := p.gens
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: %d of %d generations used, %d more asked", sdk.ErrBudgetExhausted, used, b, req.N)
	}
	p.gens += req.N
	p.mu.Unlock()
	req.TaskID = p.task.ID
	return p.model.Generate(ctx, req)
}

func (p *runPlatform) Evaluate(ctx context.Context, source, name string) (*sdk.Evaluation, error) {
	p.mu.Lock()
	if b := p.spec.Budget.Evaluations; b > 0 && p.evs+1 > b {
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: all %d evaluations used", sdk.ErrBudgetExhausted, b)
	}
	p.evs++
	n := p.evs
	p.mu.Unlock()
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
	res, err := p.target.Evaluate(ctx, sdk.EvaluateRequest{Task: p.task, Kernel: k, Device: p.spec.Device, Config: p.spec.Contract, Recipe: p.recipe},
		func(m string) { p.progress("    " + m) })
	rec := &record.Recorder{Store: p.store, Target: p.targetName, Validator: p.target}
	ev, rerr := rec.Record(ctx, record.Attempt{Task: p.task, Kernel: k, Device: p.spec.Device, Config: p.spec.Contract, Result: res, Err: err, Study: p.study})
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

func (p *runPlatform) Record(_ context.Context, a sdk.Attempt) (string, error) {
	rec := &store.AttemptRecord{Study: p.study, Task: p.task.ID, Attempt: a}
	if err := p.store.PutAttempt(rec); err != nil {
		return "", err
	}
	return rec.ID, nil
}
