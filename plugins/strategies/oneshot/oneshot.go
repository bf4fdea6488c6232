// Package oneshot is the one-shot strategy of KernelBench: one prompt, one completion at
// temperature 0 by default, one evaluation.
package oneshot

import (
	"context"
	"errors"
	"fmt"

	"github.com/kbplatform/kbplatform/plugins/strategies/internal/search"
	"github.com/kbplatform/kbplatform/sdk"
)

// Version of the strategy.
const Version = "0.1.0"

// Settings of the strategy: the prompt variant (default one-shot), chain_of_thought, the
// temperature (default 0) and max_tokens.
type Settings = search.Prompting

const schema = `{
  "type": "object",
  "properties": {
    ` + search.PromptingSchema + `
  },
  "additionalProperties": false
}`

// Strategy implements sdk.Strategy.
type Strategy struct {
	s Settings
}

var _ sdk.Strategy = (*Strategy)(nil)

// New returns the strategy.
func New() *Strategy { return &Strategy{} }

// Info identifies the plugin.
func (*Strategy) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindStrategy, Name: "oneshot", Version: Version, ConfigSchema: schema,
		Description: "one prompt, one completion, one evaluation"}
}

// Configure reads the settings.
func (s *Strategy) Configure(_ context.Context, c sdk.Configuration) error {
	var set Settings
	if err := c.Decode(&set); err != nil {
		return err
	}
	if err := set.Validate(); err != nil {
		return err
	}
	s.s = set
	return nil
}

// Run asks once and evaluates what comes back.
func (s *Strategy) Run(ctx context.Context, req sdk.RunRequest, p sdk.Platform) (*sdk.RunResult, error) {
	variant, err := s.s.PromptVariant()
	if err != nil {
		return nil, err
	}
	msgs, err := p.Prompt(ctx, variant, "", nil)
	if err != nil {
		return nil, fmt.Errorf("prompt: %w", err)
	}
	temp := 0.0
	if s.s.Temperature != nil {
		temp = *s.s.Temperature
	}
	seed := req.Seed
	gen, err := p.Generate(ctx, sdk.GenerateRequest{Messages: msgs, N: 1, TaskID: req.Task.ID,
		Params: sdk.SamplingParams{Temperature: &temp, MaxTokens: s.s.MaxTokens, Seed: &seed}})
	if (err != nil && !sdk.Transient(err)) || (err == nil && len(gen.Completions) == 0) {
		// The model gave nothing usable for this task (no kernel to replay, a refused or empty
		// reply, a missing key, a prompt too long): a finished run without a kernel, its failure
		// classified on the attempt. Retrying would give the same. Transient failures (rate
		// limits, a provider down) return an error instead, so a resumed study tries again.
		note, failure := "the model returned no completion", sdk.FailureEmptyReply
		if err != nil {
			note, failure = err.Error(), sdk.FailureClass(err)
		}
		if errors.Is(err, sdk.ErrBudgetExhausted) {
			failure = ""
		}
		if _, rerr := p.Record(ctx, sdk.Attempt{Step: 0, ParentStep: -1, FeedbackKind: "none", Note: note, Failure: failure, Prompt: msgs, Temperature: temp}); rerr != nil {
			return nil, fmt.Errorf("record: %w", rerr)
		}
		return &sdk.RunResult{Attempts: 1, Note: note}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	reply := gen.Completions[0].Text
	attempt := sdk.Attempt{Step: 0, ParentStep: -1, Completion: reply, FeedbackKind: "none", Prompt: msgs, Temperature: temp,
		PromptTokens: gen.Usage.PromptTokens, CompletionTokens: gen.Usage.CompletionTokens, CallIDs: gen.CallIDs}
	res := &sdk.RunResult{Attempts: 1}
	src, err := p.Extract(ctx, reply)
	switch {
	case errors.Is(err, sdk.ErrNoCode):
		// A generation failure, with what the reply had instead.
		attempt.Note, attempt.Failure = err.Error(), sdk.FailureNoCode
		res.Note = attempt.Note
	case err != nil:
		return nil, fmt.Errorf("extract: %w", err)
	default:
		ev, err := p.Evaluate(ctx, src, "one-shot")
		if err != nil {
			return nil, fmt.Errorf("evaluate: %w", err)
		}
		attempt.EvaluationID = ev.ID
		attempt.KernelHash = ev.Result.Kernel.Hash
		attempt.Note = ev.Result.Verdict
		if ev.Result.ErrorClass != "" {
			attempt.Note += " " + ev.Result.ErrorClass
		}
		if ev.Result.Verdict == sdk.Pass {
			res.BestEvaluation = ev.ID
		}
	}
	if _, err := p.Record(ctx, attempt); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	return res, nil
}
