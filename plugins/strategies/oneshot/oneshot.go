// Package oneshot is the one-shot strategy of KernelBench: one prompt, one completion at
// temperature 0 by default, one evaluation.
package oneshot

import (
	"context"

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

// Run asks once and evaluates what comes back: one turn of one candidate, as every strategy's
// turns are made (search.Run), so that oneshot's attempts, failures and budget stops are recorded
// exactly as the other strategies' are.
func (s *Strategy) Run(ctx context.Context, req sdk.RunRequest, p sdk.Platform) (*sdk.RunResult, error) {
	variant, err := s.s.PromptVariant()
	if err != nil {
		return nil, err
	}
	t, err := s.s.TemperatureOr(0)
	if err != nil {
		return nil, err
	}
	run := search.New(p, req)
	if _, err := run.Turn(ctx, search.Ask{Variant: variant, FeedbackKind: "none", N: 1, Temperature: t,
		MaxTokens: s.s.MaxTokens, Parent: -1, Name: "one-shot"}); err != nil {
		return nil, err
	}
	res := run.Result()
	if c := run.Step(0); res.Note == "" && c != nil && c.NoCode != "" {
		res.Note = c.NoCode // the reply had no kernel: the run's one outcome
	}
	return res, nil
}
