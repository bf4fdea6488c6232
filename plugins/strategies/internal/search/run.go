package search

import (
	"context"
	"errors"
	"fmt"

	"github.com/kbplatform/kbplatform/sdk"
)

// Run is one strategy run on one task: every candidate in step order, the best so far, and why
// the run stopped early, if it did.
type Run struct {
	p     sdk.Platform
	req   sdk.RunRequest
	all   []*Candidate
	best  *Candidate
	calls int64
	// stop says why the run ended before its plan did ("" while it may go on).
	stop string
}

// New starts a run.
func New(p sdk.Platform, req sdk.RunRequest) *Run { return &Run{p: p, req: req} }

// Best is the best candidate so far (nil before the first).
func (r *Run) Best() *Candidate { return r.best }

// Stopped says why the run cannot go on ("" when it can).
func (r *Run) Stopped() string { return r.stop }

// Step returns the candidate recorded at a step, nil for none.
func (r *Run) Step(step int) *Candidate {
	if step < 0 || step >= len(r.all) {
		return nil
	}
	return r.all[step]
}

// Result is the run's summary: the best passing evaluation, whatever turn it came from.
func (r *Run) Result() *sdk.RunResult {
	res := &sdk.RunResult{Attempts: len(r.all), Note: r.stop}
	if r.best != nil && r.best.Passed() {
		res.BestEvaluation = r.best.Eval.ID
	}
	return res
}

// Ask is one turn's request.
type Ask struct {
	Variant      string
	Feedback     string
	FeedbackKind string // "none" on the first turn
	History      []sdk.Message
	N            int // candidates
	Temperature  float64
	MaxTokens    int
	Turn         int
	Parent       int // the step the feedback came from; -1: none
	Name         string
}

// Turn asks for a.N candidates, evaluates each one with code and records every one. It returns
// the candidates recorded; when the run cannot go on (a budget ran out, the model gave nothing
// usable) Stopped says why. An error means the run failed: a transient model failure (so a
// resumed study tries the task again), a failed evaluation or a failed record.
func (r *Run) Turn(ctx context.Context, a Ask) ([]*Candidate, error) {
	if r.stop != "" {
		return nil, nil
	}
	if a.N < 1 {
		a.N = 1
	}
	msgs, err := r.p.Prompt(ctx, a.Variant, a.Feedback, a.History)
	if err != nil {
		return nil, fmt.Errorf("prompt: %w", err)
	}
	replies, usage, callIDs, err := r.generate(ctx, msgs, a)
	if err != nil {
		return nil, err
	}
	if len(replies) == 0 {
		return nil, nil // stopped; recorded by generate
	}
	var out []*Candidate
	for i, reply := range replies {
		c := &Candidate{Step: len(r.all), Turn: a.Turn, Sample: i, Parent: a.Parent, Prompt: msgs, Feedback: a.Feedback,
			FeedbackKind: a.FeedbackKind, Temperature: a.Temperature, Reply: reply}
		if err := r.evaluate(ctx, c, a.Name); err != nil {
			return out, err
		}
		// The call's tokens go to the attempt of its first reply, so that summing attempts
		// counts each call once.
		var prompt, completion int64
		var ids []string
		if i == 0 {
			prompt, completion, ids = usage.PromptTokens, usage.CompletionTokens, callIDs
		}
		if err := r.record(ctx, c, prompt, completion, ids); err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// generate asks for a.N completions in one call. When the budget cannot cover all of them it
// asks one at a time (each with its own seed) for as many as it allows.
func (r *Run) generate(ctx context.Context, msgs []sdk.Message, a Ask) ([]string, sdk.Usage, []string, error) {
	ask := func(n int) (*sdk.GenerateResponse, error) {
		t := a.Temperature
		seed := r.req.Seed + r.calls
		r.calls++
		return r.p.Generate(ctx, sdk.GenerateRequest{Messages: msgs, N: n, TaskID: r.req.Task.ID,
			Params: sdk.SamplingParams{Temperature: &t, MaxTokens: a.MaxTokens, Seed: &seed}})
	}
	gen, err := ask(a.N)
	if err == nil {
		if len(gen.Completions) == 0 {
			err = fmt.Errorf("%w: the model returned no completion", sdk.ErrEmptyReply)
		} else {
			return texts(gen), gen.Usage, gen.CallIDs, nil
		}
	}
	if errors.Is(err, sdk.ErrBudgetExhausted) && a.N > 1 {
		var out []string
		var usage sdk.Usage
		var ids []string
		for len(out) < a.N {
			g, gerr := ask(1)
			if gerr != nil || len(g.Completions) == 0 {
				if len(out) > 0 {
					// What the budget allowed; the next turn will find it exhausted.
					return out, usage, ids, nil
				}
				if gerr != nil {
					err = gerr
				}
				break
			}
			out = append(out, g.Completions[0].Text)
			usage.PromptTokens += g.Usage.PromptTokens
			usage.CompletionTokens += g.Usage.CompletionTokens
			ids = append(ids, g.CallIDs...)
		}
	}
	if sdk.Transient(err) {
		return nil, sdk.Usage{}, nil, fmt.Errorf("generate: %w", err)
	}
	// Final for this run: the budget is spent, or the model gives nothing usable (a refusal, a
	// prompt too long, nothing to replay). Asking again would get the same.
	r.stop = err.Error()
	if errors.Is(err, sdk.ErrBudgetExhausted) {
		r.stop = "stopped: " + err.Error()
		if len(r.all) > 0 {
			return nil, sdk.Usage{}, nil, nil // the run's attempts say what it did
		}
	}
	c := &Candidate{Step: len(r.all), Turn: a.Turn, Parent: a.Parent, Prompt: msgs, Feedback: a.Feedback,
		FeedbackKind: a.FeedbackKind, Temperature: a.Temperature}
	failure := sdk.FailureClass(err)
	if errors.Is(err, sdk.ErrBudgetExhausted) {
		failure = ""
	}
	att := c.attempt()
	att.Note, att.Failure = err.Error(), failure
	if _, rerr := r.p.Record(ctx, att); rerr != nil {
		return nil, sdk.Usage{}, nil, fmt.Errorf("record: %w", rerr)
	}
	r.all = append(r.all, c)
	return nil, sdk.Usage{}, nil, nil
}

func texts(g *sdk.GenerateResponse) []string {
	out := make([]string, len(g.Completions))
	for i, c := range g.Completions {
		out[i] = c.Text
	}
	return out
}

// evaluate extracts the candidate's code and has the contract judge it, unless the evaluation
// budget is spent (then the run stops; the reply is still recorded).
func (r *Run) evaluate(ctx context.Context, c *Candidate, name string) error {
	src, err := r.p.Extract(ctx, c.Reply)
	switch {
	case errors.Is(err, sdk.ErrNoCode):
		c.NoCode = err.Error()
		return nil
	case err != nil:
		return fmt.Errorf("extract: %w", err)
	}
	c.Source = src
	if r.stop != "" {
		c.Note = r.stop
		return nil
	}
	ev, err := r.p.Evaluate(ctx, src, fmt.Sprintf("%s turn %d sample %d", name, c.Turn, c.Sample))
	switch {
	case errors.Is(err, sdk.ErrBudgetExhausted):
		r.stop = "stopped: " + err.Error()
		c.Note = r.stop
		return nil
	case err != nil:
		// Keep the reply before giving up on the run.
		c.Note = "evaluation failed: " + err.Error()
		if _, rerr := r.p.Record(ctx, c.attempt()); rerr == nil {
			r.all = append(r.all, c)
		}
		return fmt.Errorf("evaluate: %w", err)
	}
	c.Eval = ev
	return nil
}

func (r *Run) record(ctx context.Context, c *Candidate, prompt, completion int64, ids []string) error {
	att := c.attempt()
	att.PromptTokens, att.CompletionTokens, att.CallIDs = prompt, completion, ids
	if _, err := r.p.Record(ctx, att); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	r.all = append(r.all, c)
	if c.Eval != nil && Better(c, r.best) {
		r.best = c
	}
	return nil
}
