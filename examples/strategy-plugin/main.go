// Command kbplugin-strategy-bestofn is an example third-party kbplatform strategy, built in its
// own Go module against the public SDK only: sample n completions, evaluate each, keep the
// fastest correct one (KernelBench's repeated sampling, fast_p@k).
//
// Build and install:
//
//	go build -o ~/.local/share/kbplatform/plugins/kbplugin-strategy-bestofn .
//	kbplatform plugins lock
//	kbplatform study run --strategy bestofn --strategy-config '{"n": 4}' ...
package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/kbplatform/kbplatform/sdk"
)

// Settings of the strategy.
type Settings struct {
	N           int     `json:"n"`
	Temperature float64 `json:"temperature"`
}

// BestOfN implements sdk.Strategy.
type BestOfN struct {
	s Settings
}

// Info identifies the plugin to the host.
func (b *BestOfN) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindStrategy, Name: "bestofn", Version: "0.2.0",
		Description:  "sample n completions in one call, evaluate each, keep the fastest correct one",
		ConfigSchema: `{"type":"object","properties":{"n":{"type":"integer","minimum":1},"temperature":{"type":"number","minimum":0}},"additionalProperties":false}`}
}

// Configure reads the settings; defaults n=4, temperature=0.7.
func (b *BestOfN) Configure(_ context.Context, c sdk.Configuration) error {
	s := Settings{N: 4, Temperature: 0.7}
	if err := c.Decode(&s); err != nil {
		return err
	}
	if s.N < 1 {
		return fmt.Errorf("%w: n must be at least 1", sdk.ErrInvalidConfig)
	}
	b.s = s
	return nil
}

// Run samples within the budget and evaluates every extracted kernel.
func (b *BestOfN) Run(ctx context.Context, req sdk.RunRequest, p sdk.Platform) (*sdk.RunResult, error) {
	n := b.s.N
	if g := req.Budget.Generations; g > 0 && n > g {
		n = g
	}
	msgs, err := p.Prompt(ctx, sdk.VariantOneShot, "", nil)
	if err != nil {
		return nil, err
	}
	temp, seed := b.s.Temperature, req.Seed
	gen, err := p.Generate(ctx, sdk.GenerateRequest{Messages: msgs, N: n, TaskID: req.Task.ID,
		Params: sdk.SamplingParams{Temperature: &temp, Seed: &seed}})
	if err != nil {
		return nil, err
	}
	res := &sdk.RunResult{}
	best := 0.0
	evals := 0
	for i, c := range gen.Completions {
		a := sdk.Attempt{Step: i, ParentStep: -1, Completion: c.Text, FeedbackKind: "none"}
		src, err := p.Extract(ctx, c.Text)
		switch {
		case errors.Is(err, sdk.ErrNoCode):
			a.Note = "no code"
		case err != nil:
			return nil, err
		case req.Budget.Evaluations > 0 && evals >= req.Budget.Evaluations:
			a.Note = "not evaluated: evaluation budget spent"
		default:
			evals++
			ev, err := p.Evaluate(ctx, src, fmt.Sprintf("sample %d", i))
			if err != nil {
				return nil, err
			}
			a.EvaluationID, a.KernelHash = ev.ID, ev.Result.Kernel.Hash
			a.Note = ev.Result.Verdict + " " + ev.Result.ErrorClass
			if ev.Result.Verdict == sdk.Pass && ev.Result.Timing != nil && ev.Result.Timing.Speedup > best {
				best, res.BestEvaluation = ev.Result.Timing.Speedup, ev.ID
			}
		}
		if _, err := p.Record(ctx, a); err != nil {
			return nil, err
		}
		res.Attempts++
	}
	if res.BestEvaluation != "" {
		res.Note = fmt.Sprintf("best of %d: %.2fx", n, best)
	}
	return res, nil
}

func main() { sdk.Serve(&BestOfN{}) }
