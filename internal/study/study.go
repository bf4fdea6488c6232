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
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kbplatform/kbplatform/internal/gateway"
	"github.com/kbplatform/kbplatform/internal/plugins"
	"github.com/kbplatform/kbplatform/internal/record"
	"github.com/kbplatform/kbplatform/internal/registry"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

// PluginRef names a plugin and its settings.
type PluginRef struct {
	Ref    string          `json:"ref"` // kind/name
	Config json.RawMessage `json:"config,omitempty"`
	// Name is the named configuration the ref came from (vllm:qwen-coder), if any: the model's
	// name in the study's records and cost table.
	Name string `json:"name,omitempty"`
}

// Label is the name the study's records use for the plugin: its configuration's name, else its
// plugin name.
func (r PluginRef) Label() string {
	if r.Name != "" {
		return r.Name
	}
	return r.Ref[strings.IndexByte(r.Ref, '/')+1:]
}

// Spec describes a study.
type Spec struct {
	Name   string    `json:"name,omitempty"`
	Tasks  []string  `json:"tasks"`
	Size   string    `json:"size"`
	Device string    `json:"device"`
	Model  PluginRef `json:"model"`
	// Models, when a study compares several, replace Model: each runs every task.
	Models   []PluginRef `json:"models,omitempty"`
	Backend  PluginRef   `json:"backend"`
	Strategy PluginRef   `json:"strategy"`
	Target   PluginRef   `json:"target"`
	Budget   sdk.Budget  `json:"budget"`
	Seed     int64       `json:"seed"`
	Contract sdk.Config  `json:"contract"`
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
	c.Models = append([]PluginRef(nil), s.Models...)
	refs := []*PluginRef{&c.Model, &c.Backend, &c.Strategy, &c.Target}
	for i := range c.Models {
		refs = append(refs, &c.Models[i])
	}
	for _, r := range refs {
		r.Config = canonical(r.Config)
	}
	b, _ := json.Marshal(c)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])[:20]
}

// ModelRefs lists the study's models.
func (s Spec) ModelRefs() []PluginRef {
	if len(s.Models) > 0 {
		return s.Models
	}
	return []PluginRef{s.Model}
}

// multi reports whether outcomes, units and records are kept per model.
func (s Spec) multi() bool { return len(s.Models) > 0 }

// unitKey names a finished (task, model) run: the task alone in a one-model study, as before
// models could be several.
func (s Spec) unitKey(task, model string) string {
	if !s.multi() {
		return task
	}
	return task + " @ " + model
}

// EmptyReport is a report with one not-yet-run outcome per task and model.
func EmptyReport(id string, spec Spec) *Report {
	rep := &Report{Study: id, Spec: spec}
	for _, m := range spec.ModelRefs() {
		for _, t := range spec.Tasks {
			o := TaskOutcome{Task: t}
			if spec.multi() {
				o.Model = m.Label()
			}
			rep.Outcomes = append(rep.Outcomes, o)
		}
	}
	return rep
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
	// Gateway gives the host-side settings of a model's calls (limits, retries, prices, cache);
	// nil: defaults. Name, plugin, settings and store are filled in by the study.
	Gateway func(model PluginRef) gateway.Options
	// Limiters are shared by every model of the process that talks to the same endpoint.
	Limiters *gateway.Limiters
}

// TaskOutcome is one task's result in a study.
type TaskOutcome struct {
	Task        string  `json:"task"`
	Model       string  `json:"model,omitempty"` // in a study of several models
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
	// ExcludeFlags leaves results carrying any of these flags out of correctness, best speedup
	// and so fast_p (they stay stored).
	ExcludeFlags []string `json:"exclude_flags,omitempty"`
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
	strategy, err := d.Plugins.Start(ctx, spec.Strategy.Ref, spec.Strategy.Config, nil)
	if err != nil {
		return nil, fmt.Errorf("strategy: %w", err)
	}
	var gws []*gateway.Gateway
	for _, ref := range spec.ModelRefs() {
		model, err := d.Plugins.Start(ctx, ref.Ref, ref.Config, host)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", ref.Label(), err)
		}
		gopts := gateway.Options{Retry: gateway.DefaultRetry()}
		if d.Gateway != nil {
			gopts = d.Gateway(ref)
		}
		gopts.Name, gopts.Plugin, gopts.Config, gopts.Store = ref.Label(), ref.Ref, ref.Config, d.Store
		// Replaying costs nothing: its replies are made again rather than cached.
		gopts.Cacheable = !slices.Contains(model.Info().Capabilities, "deterministic")
		if gopts.Log == nil {
			gopts.Log = progress
		}
		gws = append(gws, gateway.New(model.Model(), gopts, d.Limiters))
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
	refs := spec.ModelRefs()
	total := len(tasks) * len(refs)
	step := 0
	for mi, ref := range refs {
		for _, task := range tasks {
			if ctx.Err() != nil {
				break
			}
			step++
			label := ref.Label()
			out := TaskOutcome{Task: task.ID}
			if spec.multi() {
				out.Model = label
			}
			unit := spec.unitKey(task.ID, label)
			done, err := d.Store.UnitDone(id, unit)
			if err != nil {
				return nil, err
			}
			if done {
				out.Done, out.Skipped = true, true
				rep.Outcomes = append(rep.Outcomes, out)
				progress(fmt.Sprintf("[%d/%d] %s: done in an earlier run", step, total, unit))
				continue
			}
			progress(fmt.Sprintf("[%d/%d] %s: %s with %s", step, total, task.ID, spec.Strategy.Ref, label))
			p := &runPlatform{hostPlatform: host, study: id, task: task, spec: spec, hw: hw, recipe: recipe, modelName: label,
				model: gws[mi], backend: backend.Backend(), target: target.Target(), targetName: spec.Target.Ref, progress: progress}
			res, err := strategy.Strategy().Run(ctx, sdk.RunRequest{Task: task, Budget: spec.Budget, Seed: spec.Seed, Study: id}, p)
			if err != nil {
				out.Error = err.Error()
				progress(fmt.Sprintf("[%d/%d] %s: %v", step, total, unit, err))
			} else {
				out.Done = true
				if err := d.Store.PutUnit(store.Unit{Study: id, Task: unit, Attempts: res.Attempts, BestEvaluation: res.BestEvaluation,
					Note: res.Note, FinishedAt: time.Now().UTC()}); err != nil {
					return nil, err
				}
			}
			rep.Outcomes = append(rep.Outcomes, out)
		}
	}
	if err := Summarize(d.Store, rep); err != nil {
		return nil, err
	}
	return rep, ctx.Err()
}

// Summarize fills each outcome's correctness and best speedup from the stored evaluations, leaving
// out results flagged with any of rep.ExcludeFlags.
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
	// Outcomes are per task, or per task and model in a study of several models.
	model := func(m string) string {
		if rep.Spec.multi() {
			return m
		}
		return ""
	}
	idx := map[string]int{}
	for i := range rep.Outcomes {
		o := &rep.Outcomes[i]
		key := rep.Spec.unitKey(o.Task, o.Model)
		idx[key] = i
		o.Attempts = 0
		u, ok := done[key]
		o.Done = o.Done || ok
		if ok && o.Reason == "" {
			o.Reason = u.Note
		}
	}
	for _, a := range atts {
		if i, ok := idx[rep.Spec.unitKey(a.Task, model(a.Model))]; ok {
			rep.Outcomes[i].Attempts++
		}
	}
	// By outcome: a verdict about some kernel; the last failure that was not a kernel's, and why;
	// the last verdict about a kernel.
	judged := map[int]bool{}
	blamed := map[int]string{}
	last := map[int]string{}
	for _, ev := range evs {
		i, ok := idx[rep.Spec.unitKey(ev.Result.Task.ID, model(ev.Model))]
		if !ok {
			continue
		}
		if slices.ContainsFunc(rep.ExcludeFlags, ev.Result.HasFlag) {
			continue
		}
		o := &rep.Outcomes[i]
		b := ev.Blame
		if b == "" {
			b = record.BlameOf(ev.Result)
		}
		if b == "" || b == record.BlameKernel {
			judged[i] = true
			last[i] = describe(ev.Result)
		} else {
			o.Blame, blamed[i] = b, ev.Result.ErrorClass+": "+firstLine(ev.Result.Message)
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
		case judged[i]:
			o.Blame = ""
			if o.Correct {
				o.Reason = fmt.Sprintf("pass, best %.2fx", o.BestSpeedup)
			} else if o.Reason == "" {
				o.Reason = last[i]
			}
		case o.Blame != "":
			o.Reason = blamed[i]
		case o.Error != "":
			// The strategy or the model failed before any kernel was judged.
			o.Blame, o.Reason = record.BlamePlatform, firstLine(o.Error)
		}
	}
	return nil
}

// ByModel splits outcomes by model, in the order models first appear.
func ByModel(outcomes []TaskOutcome) (models []string, by map[string][]TaskOutcome) {
	by = map[string][]TaskOutcome{}
	for _, o := range outcomes {
		if _, ok := by[o.Model]; !ok {
			models = append(models, o.Model)
		}
		by[o.Model] = append(by[o.Model], o)
	}
	return models, by
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
func (h *hostPlatform) Kernels(ctx context.Context, taskID string, limit int) ([]sdk.Kernel, error) {
	return h.StoredKernels(ctx, sdk.KernelQuery{Task: taskID, Limit: limit})
}

// StoredKernels returns the distinct kernels evaluated on a task (in one study, passed only, as
// asked), newest first.
func (h *hostPlatform) StoredKernels(_ context.Context, q sdk.KernelQuery) ([]sdk.Kernel, error) {
	var evs []*store.Evaluation
	var err error
	if q.Study != "" {
		st, serr := h.store.Study(q.Study)
		if serr != nil {
			return nil, fmt.Errorf("%w: study %s: %v", sdk.ErrNotFound, q.Study, serr)
		}
		all, serr := h.store.StudyEvaluations(st.ID)
		if serr != nil {
			return nil, serr
		}
		for i := len(all) - 1; i >= 0; i-- {
			if all[i].Result.Task.ID == q.Task {
				evs = append(evs, all[i])
			}
		}
	} else if evs, err = h.store.Evaluations(store.EvalFilter{Task: q.Task}); err != nil {
		return nil, err
	}
	limit := q.Limit
	var out []sdk.Kernel
	seen := map[string]bool{}
	for _, ev := range evs {
		if q.Passed && ev.Result.Verdict != sdk.Pass {
			continue
		}
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
	model      *gateway.Gateway
	backend    sdk.Backend
	target     sdk.Target
	targetName string
	modelName  string
	progress   func(string)
	mu         sync.Mutex
	gens, evs  int
	pending    []string // calls made since the last recorded attempt
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
	resp, err := p.model.Generate(ctx, gateway.Call{Study: p.study, Task: p.task.ID, Strategy: p.spec.Strategy.Ref}, req)
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
	var res *sdk.Result
	if Rejection(issues) != "" {
		// Rejected by the backend's rules: no build, no device time.
		res = Rejected(p.task, k, p.spec.Device, issues)
		p.progress("    rejected by static checks: " + firstLine(res.Message))
	} else {
		res, err = p.target.Evaluate(ctx, sdk.EvaluateRequest{Task: p.task, Kernel: k, Device: p.spec.Device, Config: p.spec.Contract, Recipe: p.recipe},
			func(m string) { p.progress("    " + m) })
		if err == nil && res != nil {
			ApplyFlags(res, issues)
		}
	}
	rec := &record.Recorder{Store: p.store, Target: p.targetName, Validator: p.target}
	ev, rerr := rec.Record(ctx, record.Attempt{Task: p.task, Kernel: k, Device: p.spec.Device, Config: p.spec.Contract, Result: res, Err: err,
		Study: p.study, Model: p.modelName, Issues: issues})
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

// Record stores an attempt and links the model calls behind it: those the strategy names, else
// every call made since the previous attempt (a strategy that knows nothing of call ids, or a
// generation that failed, still gets its calls linked).
func (p *runPlatform) Record(_ context.Context, a sdk.Attempt) (string, error) {
	p.mu.Lock()
	if len(a.CallIDs) == 0 {
		a.CallIDs = p.pending
	}
	p.pending = nil
	p.mu.Unlock()
	rec := &store.AttemptRecord{Study: p.study, Task: p.task.ID, Model: p.modelName, Attempt: a}
	if err := p.store.PutAttempt(rec); err != nil {
		return "", err
	}
	if err := p.store.LinkCalls(p.study, a.CallIDs, rec.ID); err != nil {
		return "", err
	}
	return rec.ID, nil
}
