// Package sampling is repeated sampling: k independent completions of the same prompt at a
// temperature above zero, every one evaluated; the best correct one counts (the @k metrics are
// read from the attempts' Sample).
package sampling

import (
	"context"
	"fmt"

	"github.com/kbplatform/kbplatform/plugins/strategies/internal/search"
	"github.com/kbplatform/kbplatform/sdk"
)

// Version of the strategy.
const Version = "0.1.0"

// Defaults.
const (
	DefaultK           = 8
	DefaultTemperature = 0.7
)

// Settings of the strategy.
type Settings struct {
	search.Prompting
	K int `json:"k,omitempty"`
}

const schema = `{
  "type": "object",
  "properties": {
    "k": {"type": "integer", "minimum": 1},
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
func New() *Strategy { return &Strategy{s: Settings{K: DefaultK}} }

// Info identifies the plugin.
func (*Strategy) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindStrategy, Name: "sampling", Version: Version, ConfigSchema: schema,
		Description: "k independent samples of one prompt at a temperature, all evaluated"}
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
	switch {
	case set.K < 0:
		return fmt.Errorf("%w: k must be at least 1 (got %d)", sdk.ErrInvalidConfig, set.K)
	case set.K == 0:
		set.K = DefaultK
	}
	t, _ := set.TemperatureOr(DefaultTemperature)
	if set.K > 1 && t == 0 {
		return fmt.Errorf("%w: k=%d samples at temperature 0 would all be the same reply; set a temperature above 0", sdk.ErrInvalidConfig, set.K)
	}
	s.s = set
	return nil
}

// Run asks for k completions of one prompt and evaluates each.
func (s *Strategy) Run(ctx context.Context, req sdk.RunRequest, p sdk.Platform) (*sdk.RunResult, error) {
	variant, err := s.s.PromptVariant()
	if err != nil {
		return nil, err
	}
	t, err := s.s.TemperatureOr(DefaultTemperature)
	if err != nil {
		return nil, err
	}
	run := search.New(p, req)
	if _, err := run.Turn(ctx, search.Ask{Variant: variant, FeedbackKind: "none", N: s.s.K, Temperature: t,
		MaxTokens: s.s.MaxTokens, Parent: -1, Name: "sampling"}); err != nil {
		return nil, err
	}
	return run.Result(), nil
}
