package search

import (
	"context"
	"fmt"

	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/feedback"
)

// Refining holds the settings refine and backtrack share.
type Refining struct {
	Prompting
	Turns      int    `json:"turns,omitempty"`
	Feedback   string `json:"feedback,omitempty"` // G, G+E, G+E+P
	Format     string `json:"format,omitempty"`   // raw, ast-diff, contrastive
	Candidates int    `json:"candidates,omitempty"`
	// Python runs the ast-diff format's parser (default $KBP_PYTHON, then python3).
	Python string `json:"python,omitempty"`
}

// Defaults of refinement.
const (
	DefaultTurns = 5
)

// RefiningSchema is the JSON schema of Refining's keys.
const RefiningSchema = `"turns":      {"type": "integer", "minimum": 1},
    "feedback":   {"enum": ["G", "G+E", "G+E+P"]},
    "format":     {"enum": ["raw", "ast-diff", "contrastive"]},
    "candidates": {"type": "integer", "minimum": 1},
    "python":     {"type": "string"},
    ` + PromptingSchema

// Plan is a checked refinement: what a run does.
type Plan struct {
	Name        string // the strategy, for evaluation names
	Variant     string
	Turns       int
	Candidates  int
	Temperature float64
	MaxTokens   int
	Builder     feedback.Builder
	// Backtrack: when a turn's pick ranks below the kernel it refined, go back to the best so
	// far and raise the temperature by TemperatureStep, up to MaxTemperature.
	Backtrack       bool
	TemperatureStep float64
	MaxTemperature  float64
}

// Plan checks the settings and fills the defaults.
func (s Refining) Plan(name string) (Plan, error) {
	if err := s.Validate(); err != nil {
		return Plan{}, err
	}
	variant, _ := s.PromptVariant()
	parts, err := feedback.ParseParts(s.Feedback)
	if err != nil {
		return Plan{}, err
	}
	format, err := feedback.ParseFormat(s.Format)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Name: name, Variant: variant, Turns: s.Turns, Candidates: s.Candidates, MaxTokens: s.MaxTokens,
		Builder: feedback.Builder{Parts: parts, Format: format, Differ: feedback.Differ{Python: s.Python}}}
	switch {
	case p.Turns < 0:
		return Plan{}, fmt.Errorf("%w: turns must be at least 1 (got %d)", sdk.ErrInvalidConfig, p.Turns)
	case p.Turns == 0:
		p.Turns = DefaultTurns
	}
	switch {
	case p.Candidates < 0:
		return Plan{}, fmt.Errorf("%w: candidates must be at least 1 (got %d)", sdk.ErrInvalidConfig, p.Candidates)
	case p.Candidates == 0:
		p.Candidates = 1
	}
	p.Temperature, _ = s.TemperatureOr(0)
	if p.Candidates > 1 && p.Temperature == 0 {
		return Plan{}, fmt.Errorf("%w: %d candidates per turn at temperature 0 would all be the same reply; set a temperature above 0",
			sdk.ErrInvalidConfig, p.Candidates)
	}
	return p, nil
}

// Refine runs a plan: a first prompt, then turns whose prompts carry feedback on the kernel of
// the turn before (the best of its candidates, the contract deciding). The best kernel of every
// turn counts, not the last.
func Refine(ctx context.Context, p sdk.Platform, req sdk.RunRequest, plan Plan) (*sdk.RunResult, error) {
	run := New(p, req)
	temp := plan.Temperature
	var base, regressed *Candidate // what the next turn refines; a worse pick just left behind
	for turn := 0; turn < plan.Turns && run.Stopped() == ""; turn++ {
		ask := Ask{Variant: plan.Variant, FeedbackKind: string(feedback.None), N: plan.Candidates, Temperature: temp,
			MaxTokens: plan.MaxTokens, Turn: turn, Parent: -1, Name: plan.Name}
		if base != nil {
			ask.Feedback, ask.FeedbackKind, ask.History, ask.Parent = prompt(ctx, plan.Builder, run, base, regressed)
		}
		cs, err := run.Turn(ctx, ask)
		if err != nil {
			return nil, err
		}
		pick := Pick(cs)
		if pick == nil {
			break
		}
		regressed = nil
		if plan.Backtrack && base != nil && Better(base, pick) {
			// Worse than what it refined: start again from the best so far, hotter.
			regressed, base = pick, run.Best()
			if base == nil {
				base = pick
			}
			temp = min(temp+plan.TemperatureStep, plan.MaxTemperature)
			continue
		}
		base = pick
	}
	return run.Result(), nil
}

// prompt builds one turn's feedback about base (and the worse pick backtracking left behind),
// with the history the format needs and the step the feedback came from.
func prompt(ctx context.Context, b feedback.Builder, run *Run, base, regressed *Candidate) (string, string, []sdk.Message, int) {
	latest := base
	if b.Format == feedback.Contrastive && regressed != nil {
		// Best so far against the latest that did worse: after a backtrack, the worse pick.
		latest = regressed
	}
	req := feedback.Request{Latest: latest.Kernel()}
	req.Best = req.Latest
	parent := latest.Step
	if best := run.Best(); best != nil && best != latest {
		req.Best = best.Kernel()
		if b.Format == feedback.Contrastive {
			parent = best.Step // the kernel shown in full, the one to start from
		}
	}
	if regressed != nil && b.Format != feedback.Contrastive {
		req.Regressed = regressed.Kernel()
	}
	var history []sdk.Message
	if b.Format == feedback.ASTDiff && base.Source != "" {
		req.Before = run.Step(base.Parent).Kernel()
		// The complete kernel reaches the model as its own earlier reply; the feedback then
		// needs only what changed.
		history = exchange(base)
	}
	text, kind := b.Build(ctx, req)
	return text, kind, history, parent
}

// exchange is the last user message of a candidate's prompt and its reply.
func exchange(c *Candidate) []sdk.Message {
	var out []sdk.Message
	for i := len(c.Prompt) - 1; i >= 0; i-- {
		if c.Prompt[i].Role == "user" {
			out = append(out, c.Prompt[i])
			break
		}
	}
	return append(out, sdk.Message{Role: "assistant", Content: c.Reply})
}
