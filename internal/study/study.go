// Package study runs studies: tasks × model × backend × strategy × target under a budget, every
// piece a plugin. A study's id is a hash of its spec, and each (study, task) unit is marked done
// only when its strategy run finished, so a restarted study skips what is done and redoes the rest.
package study

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kbplatform/kbplatform/internal/record"
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
	// Backends, Strategies, Targets and Seeds, when a study compares several, replace Backend,
	// Strategy, Target and Seed: the study runs their cross product with its models (Arms). A
	// spec with none of them has the id and unit keys it had before arms existed.
	Backends   []PluginRef `json:"backends,omitempty"`
	Strategies []PluginRef `json:"strategies,omitempty"`
	Targets    []PluginRef `json:"targets,omitempty"`
	Seeds      []int64     `json:"seeds,omitempty"`
	// Limit bounds the whole study. It is not part of the id: a study it stopped resumes under a
	// bigger one.
	Limit StudyBudget `json:"study_budget,omitzero"`
	// ContractVersion is the version of the contract the target runs (its `contract:` capability).
	// It is part of the id: a study under a new contract starts afresh and reuses nothing.
	ContractVersion string `json:"contract_version,omitempty"`
}

// StudyBudget bounds a whole study (0: unlimited): once it is spent no new unit starts; units
// already running finish under their own budget.
type StudyBudget struct {
	// CostUSD is the model spend of every run of the study in dollars, priced as the unit budget
	// prices it (cached replies at what they would cost).
	CostUSD float64 `json:"cost_usd,omitempty"`
	// Seconds is wall time: the union of the study's finished units' run times over all its runs,
	// and the current run's.
	Seconds float64 `json:"seconds,omitempty"`
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
	c.Limit = StudyBudget{}
	c.Tasks = append([]string(nil), s.Tasks...)
	sort.Strings(c.Tasks)
	refs := []*PluginRef{&c.Model, &c.Backend, &c.Strategy, &c.Target}
	for _, list := range []*[]PluginRef{&c.Models, &c.Backends, &c.Strategies, &c.Targets} {
		*list = append([]PluginRef(nil), *list...)
		for i := range *list {
			refs = append(refs, &(*list)[i])
		}
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

// recordKey is the unit key of a stored attempt or evaluation: by its arm, or in a spec of the
// form before arms by its task and model.
func (s Spec) recordKey(arm, task, model string) string {
	if s.legacy() {
		if !s.multi() {
			return task
		}
		return task + " @ " + model
	}
	return arm + "/" + task
}

// EmptyReport is a report with one not-yet-run outcome per arm and task.
func EmptyReport(id string, spec Spec) *Report {
	rep := &Report{Study: id, Spec: spec}
	labels := spec.ArmLabels()
	for i, a := range spec.Arms() {
		for _, t := range spec.Tasks {
			rep.Outcomes = append(rep.Outcomes, spec.outcome(a, labels[i], t))
		}
	}
	return rep
}

// outcome is an arm's not-yet-run outcome on a task.
func (s Spec) outcome(a Arm, label, task string) TaskOutcome {
	o := TaskOutcome{Task: task, Arm: label, Unit: s.UnitKey(a, task)}
	if s.multi() {
		o.Model = a.Model.Label()
	}
	return o
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

// TaskOutcome is one task's result in a study.
type TaskOutcome struct {
	Task  string `json:"task"`
	Model string `json:"model,omitempty"` // in a study of several models
	// Arm names the arm among the study's others (Spec.ArmLabels; "" in a study of one arm) and
	// Unit is the unit's key.
	Arm      string `json:"arm,omitempty"`
	Unit     string `json:"unit"`
	Done     bool   `json:"done"`
	Skipped  bool   `json:"skipped,omitempty"` // done by an earlier run
	Attempts int    `json:"attempts"`
	// Correct: some kernel of the unit is a solution (passed without a kernel flag); BestSpeedup
	// and BestEval are the best solution's.
	Correct     bool    `json:"correct"`
	BestSpeedup float64 `json:"best_speedup,omitempty"`
	BestEval    string  `json:"best_evaluation,omitempty"`
	// Flagged: some kernel passed carrying a kernel flag (sdk.KernelFlags), no solution;
	// FlaggedSpeedup is the best of those, for the figure counting flagged.
	Flagged        bool    `json:"flagged,omitempty"`
	FlaggedSpeedup float64 `json:"flagged_speedup,omitempty"`
	// Ran: the unit finished, failed, or made an attempt. A unit that never ran (a study
	// interrupted or stopped by its budget first) is in no fast_p, and summaries say how many.
	Ran   bool   `json:"ran"`
	Error string `json:"error,omitempty"`
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
	// Stopped says why units were left unstarted (the study's budget), if they were.
	Stopped string `json:"stopped,omitempty"`
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
	// Outcomes are per unit: arm and task.
	idx := map[string]int{}
	for i := range rep.Outcomes {
		o := &rep.Outcomes[i]
		key := o.Unit
		idx[key] = i
		o.Attempts = 0
		u, ok := done[key]
		o.Done = o.Done || ok
		if ok && o.Reason == "" {
			o.Reason = u.Note
		}
	}
	for _, a := range atts {
		if i, ok := idx[rep.Spec.recordKey(a.Arm, a.Task, a.Model)]; ok {
			rep.Outcomes[i].Attempts++
		}
	}
	// By outcome: a verdict about some kernel; the last failure that was not a kernel's, and why;
	// the last verdict about a kernel.
	judged := map[int]bool{}
	blamed := map[int]string{}
	last := map[int]string{}
	for _, ev := range evs {
		i, ok := idx[rep.Spec.recordKey(ev.Arm, ev.Result.Task.ID, ev.Model)]
		if !ok {
			continue
		}
		if slices.ContainsFunc(rep.ExcludeFlags, ev.Result.HasFlag) {
			continue
		}
		o := &rep.Outcomes[i]
		o.Ran = true
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
		if !ev.Result.Solution() {
			// It passed, but it is no solution (a kernel flag): counted only counting flagged.
			o.Flagged = true
			o.FlaggedSpeedup = max(o.FlaggedSpeedup, ev.Result.Timing.Speedup)
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
			switch {
			case o.Correct:
				o.Reason = fmt.Sprintf("pass, best %.2fx", o.BestSpeedup)
			case o.Flagged:
				o.Reason = fmt.Sprintf("passed only with a kernel flag (no solution), best %.2fx", o.FlaggedSpeedup)
			case o.Reason == "":
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

// ByArm splits outcomes by arm, in the order arms first appear.
func ByArm(outcomes []TaskOutcome) (arms []string, by map[string][]TaskOutcome) {
	by = map[string][]TaskOutcome{}
	for _, o := range outcomes {
		if _, ok := by[o.Arm]; !ok {
			arms = append(arms, o.Arm)
		}
		by[o.Arm] = append(by[o.Arm], o)
	}
	return arms, by
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

// FastP is KernelBench's fast_p over the outcomes: the fraction of tasks with a solution (a
// kernel that passed without a kernel flag) whose speedup over eager exceeds p (fast_0 is the
// correctness rate); countFlagged counts flagged passes too. Tasks without a verdict about any
// kernel because the task, the platform or the environment failed (Blame) are left out: they say
// nothing about the model; so are units that never ran.
func FastP(outcomes []TaskOutcome, p float64, countFlagged bool) float64 {
	n, total := 0, 0
	for _, o := range outcomes {
		if o.Blame != "" || !o.HasRun() {
			continue
		}
		total++
		best, ok := o.BestSpeedup, o.Correct
		if countFlagged && o.Flagged {
			best, ok = max(best, o.FlaggedSpeedup), true
		}
		if ok && (p <= 0 || best > p) {
			n++
		}
	}
	if total == 0 {
		return 0
	}
	return float64(n) / float64(total)
}

// HasRun reports whether the unit ran: it finished or failed, or has a stored evaluation. A unit
// cut off before its first evaluation was stored (its attempt's evaluation interrupted) did
// not: counting it would count the interruption as the model's failure.
func (o TaskOutcome) HasRun() bool { return o.Ran || o.Done || o.Error != "" }

// AnyFlagged reports whether some outcome passed with a kernel flag: only then does fast_p
// counting flagged differ.
func AnyFlagged(outcomes []TaskOutcome) bool {
	return slices.ContainsFunc(outcomes, func(o TaskOutcome) bool { return o.Flagged && o.Blame == "" && o.HasRun() })
}

// Judged counts the outcomes FastP is computed over.
func Judged(outcomes []TaskOutcome) int {
	n := 0
	for _, o := range outcomes {
		if o.Blame == "" && o.HasRun() {
			n++
		}
	}
	return n
}

// NotRun counts the outcomes of units that never ran.
func NotRun(outcomes []TaskOutcome) int {
	n := 0
	for _, o := range outcomes {
		if !o.HasRun() {
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
