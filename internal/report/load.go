// Package report turns a stored study into the paper's tables (fast_p per arm and level, @k,
// @N by turn, error classes, confidence intervals), its plots, and the cross-hardware comparison.
// Reading the store happens here, once; the arithmetic is internal/metrics'.
package report

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/kbplatform/kbplatform/internal/metrics"
	"github.com/kbplatform/kbplatform/internal/record"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

// Attempt is one attempt of a study as reports and exports see it: the metrics row plus what
// the store knows about it.
type Attempt struct {
	metrics.Row
	StudyName string `json:"study_name,omitempty"`
	// ID is the attempt's id; empty for an evaluation no attempt names (stores older than
	// attempts, or a strategy that evaluated without recording).
	ID               string    `json:"attempt_id,omitempty"`
	Evaluation       string    `json:"evaluation_id,omitempty"`
	Platform         string    `json:"platform,omitempty"`
	Step             int       `json:"step"`
	ParentStep       int       `json:"parent_step"`
	Failure          string    `json:"failure,omitempty"`
	FeedbackKind     string    `json:"feedback_kind,omitempty"`
	PromptTokens     int64     `json:"prompt_tokens,omitempty"`
	CompletionTokens int64     `json:"completion_tokens,omitempty"`
	Temperature      float64   `json:"temperature,omitempty"`
	CandidateMS      float64   `json:"candidate_median_ms,omitempty"`
	EagerMS          float64   `json:"eager_median_ms,omitempty"`
	Message          string    `json:"message,omitempty"` // first line of the verdict's message
	At               time.Time `json:"at"`
}

// Study is a study's attempts, loaded.
type Study struct {
	ID       string    `json:"id"`
	Name     string    `json:"name,omitempty"`
	Attempts []Attempt `json:"attempts"`
}

// Rows are the study's metrics rows.
func (s *Study) Rows() []metrics.Row {
	out := make([]metrics.Row, len(s.Attempts))
	for i, a := range s.Attempts {
		out[i] = a.Row
	}
	return out
}

// LoadOptions are what Load cannot read from the study itself.
type LoadOptions struct {
	// Level gives a task's level when its records do not carry one (nil: 0).
	Level func(task string) int
}

// armSpec is the part of a study's spec (internal/study.Spec) that names its arm: attempts
// recorded before attempts carried their arm fall back to it. Decoded here, not imported, so the
// spec can grow without breaking reports.
type armSpec struct {
	Model    pluginRef   `json:"model"`
	Models   []pluginRef `json:"models"`
	Backend  pluginRef   `json:"backend"`
	Strategy pluginRef   `json:"strategy"`
	Target   pluginRef   `json:"target"`
	Seed     int64       `json:"seed"`
}

type pluginRef struct {
	Ref  string `json:"ref"`
	Name string `json:"name"`
}

// label is the name records use for a plugin: its configuration's name, else its plugin name.
func (r pluginRef) label() string {
	if r.Name != "" {
		return r.Name
	}
	return shortRef(r.Ref)
}

// shortRef drops a plugin reference's kind: backend/cuda → cuda.
func shortRef(s string) string {
	for _, kind := range []string{"model/", "backend/", "strategy/", "target/"} {
		if v, ok := strings.CutPrefix(s, kind); ok {
			return v
		}
	}
	return s
}

// Load reads a study (id or unique prefix): one Attempt per recorded attempt, plus one per
// evaluation of the study that no attempt names.
func Load(st *store.Store, id string, opt LoadOptions) (*Study, error) {
	s, err := st.Study(id)
	if err != nil {
		return nil, fmt.Errorf("study %s: %w", id, err)
	}
	var spec armSpec
	if len(s.Spec) > 0 {
		if err := json.Unmarshal(s.Spec, &spec); err != nil {
			return nil, fmt.Errorf("study %s: its spec does not decode: %w", s.ID, err)
		}
	}
	evs, err := st.StudyEvaluations(s.ID)
	if err != nil {
		return nil, err
	}
	atts, err := st.Attempts(s.ID, "")
	if err != nil {
		return nil, err
	}
	byID := map[string]*store.Evaluation{}
	for _, ev := range evs {
		byID[ev.ID] = ev
	}
	bl := &baselines{st: st, by: map[string][]store.Baseline{}}
	out := &Study{ID: s.ID, Name: s.Name}
	named := map[string]bool{}
	for _, a := range atts {
		at := Attempt{StudyName: s.Name, ID: a.ID, Step: a.Step, ParentStep: a.ParentStep, Failure: a.Failure,
			FeedbackKind: a.FeedbackKind, PromptTokens: a.PromptTokens, CompletionTokens: a.CompletionTokens,
			Temperature: a.Temperature, At: a.At}
		at.Row = metrics.Row{Study: s.ID, Task: a.Task, Turn: a.Turn, Sample: a.Sample, Kernel: a.KernelHash}
		arm(&at.Row, a, spec)
		if a.EvaluationID != "" {
			ev := byID[a.EvaluationID]
			if ev == nil {
				// The index of the study's evaluations may not list one a strategy recorded.
				if ev, err = st.Evaluation(a.EvaluationID); err != nil {
					return nil, fmt.Errorf("study %s: attempt %s names evaluation %s: %w", s.ID, a.ID, a.EvaluationID, err)
				}
			}
			named[ev.ID] = true
			if err := evaluated(&at, ev, bl); err != nil {
				return nil, err
			}
			if at.Model == "" {
				at.Model = ev.Model
			}
		} else if a.KernelHash == "" {
			at.Class = metrics.ClassGeneration
			at.Message = a.Failure
		} else {
			// A kernel that was never evaluated (the budget ran out, the target failed before
			// recording): no verdict about it.
			at.Blame, at.Class = record.BlamePlatform, "not_evaluated"
		}
		out.Attempts = append(out.Attempts, at)
	}
	sample := map[string]int{}
	for _, ev := range evs {
		if named[ev.ID] {
			continue
		}
		at := Attempt{StudyName: s.Name, At: ev.StoredAt}
		at.Row = metrics.Row{Study: s.ID, Task: ev.Result.Task.ID, Kernel: ev.Result.Kernel.Hash, Model: ev.Model}
		arm(&at.Row, store.AttemptRecord{}, spec)
		key := at.Model + "\x00" + at.Task
		at.Sample = sample[key]
		sample[key]++
		if err := evaluated(&at, ev, bl); err != nil {
			return nil, err
		}
		out.Attempts = append(out.Attempts, at)
	}
	// Generation failures carry no task record: take the level from the task's other attempts.
	levels := map[string]int{}
	for _, a := range out.Attempts {
		if a.Level != 0 {
			levels[a.Task] = a.Level
		}
	}
	for i := range out.Attempts {
		a := &out.Attempts[i]
		if a.Level == 0 {
			a.Level = levels[a.Task]
		}
		if a.Level == 0 && opt.Level != nil {
			a.Level = opt.Level(a.Task)
		}
	}
	return out, nil
}

// arm fills the row's arm from the attempt, falling back to the study's spec for attempts
// recorded before attempts named their arm.
func arm(r *metrics.Row, a store.AttemptRecord, spec armSpec) {
	pick := func(v string, ref pluginRef) string {
		if v != "" {
			return shortRef(v)
		}
		return ref.label()
	}
	if a.Model != "" {
		r.Model = a.Model
	}
	if r.Model == "" && len(spec.Models) == 0 {
		r.Model = spec.Model.label()
	}
	r.Backend = pick(a.Backend, spec.Backend)
	r.Strategy = pick(a.Strategy, spec.Strategy)
	r.Target = pick(a.Target, spec.Target)
	r.Seed = a.Seed
	if a.Arm == "" {
		r.Seed = spec.Seed
	}
}

// evaluated fills what an evaluation says about the attempt.
func evaluated(at *Attempt, ev *store.Evaluation, bl *baselines) error {
	r := ev.Result
	if r == nil {
		return fmt.Errorf("evaluation %s has no result", ev.ID)
	}
	at.Evaluation, at.Platform = ev.ID, ev.Platform
	if at.Task == "" {
		at.Task = r.Task.ID
	}
	if at.Kernel == "" {
		at.Kernel = r.Kernel.Hash
	}
	at.Level = r.Task.Level
	at.Verdict, at.Class = r.Verdict, r.ErrorClass
	at.Blame = ev.Blame
	if at.Blame == "" {
		at.Blame = record.BlameOf(r)
	}
	at.Hardware = hardware(ev)
	for _, f := range r.Flags {
		at.Flags = append(at.Flags, f.Name)
	}
	at.Message = firstLine(r.Message)
	if r.Timing != nil {
		at.CandidateMS, at.EagerMS = r.Timing.Candidate.Median, r.Timing.Reference.Median
		if r.Verdict == sdk.Pass {
			at.Speedup = r.Timing.Speedup
			vs, err := bl.versus(ev)
			if err != nil {
				return err
			}
			at.Versus = vs
		}
	}
	return nil
}

// hardware names the device an evaluation ran on, from its fingerprint: the GPU, else the CPU
// model (two CPUs' device names are both the architecture), and the torch version; else the target.
func hardware(ev *store.Evaluation) string {
	fp := ev.Result.Fingerprint
	name := ""
	for _, k := range []string{"gpu_name", "cpu_model", "device_name"} {
		if v, ok := fp[k].(string); ok && v != "" {
			name = v
			break
		}
	}
	if name == "" {
		return ev.Target
	}
	if t, ok := fp["torch"].(string); ok && t != "" {
		name += ", torch " + t
	}
	return name
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// baselines reads the stored torch.compile baselines of tasks, once per task.
type baselines struct {
	st *store.Store
	by map[string][]store.Baseline
}

// versus is the candidate's speedup against every compile mode timed on the same platform and
// size: the mode's median over the candidate's. Modes timed elsewhere do not count: a speedup
// across two machines measures the machines.
func (b *baselines) versus(ev *store.Evaluation) (map[string]float64, error) {
	r := ev.Result
	if r.Timing == nil || r.Timing.Candidate.Median <= 0 {
		return nil, nil
	}
	list, ok := b.by[r.Task.ID]
	if !ok {
		var err error
		if list, err = b.st.Baselines(r.Task.ID); err != nil {
			return nil, err
		}
		b.by[r.Task.ID] = list
	}
	var out map[string]float64
	for _, bl := range list {
		if bl.TaskID != r.Task.ID || bl.Mode == metrics.Eager || bl.Platform != ev.Platform || bl.Size != r.Task.Size ||
			bl.Verdict != sdk.Pass || bl.Stats == nil || bl.Stats.Median <= 0 {
			continue
		}
		if out == nil {
			out = map[string]float64{}
		}
		out[bl.Mode] = bl.Stats.Median / r.Timing.Candidate.Median
	}
	return out, nil
}
