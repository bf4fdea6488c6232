// Package backtrack is refinement that backs off: when a turn's kernel ranks below the kernel it
// refined (a correct kernel turned wrong, a running one that no longer builds, a slower one), the
// next turn starts again from the best kernel so far, at a temperature raised by
// temperature_step (up to max_temperature), so that the model tries something else.
package backtrack

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
	DefaultTemperatureStep = 0.2
	DefaultMaxTemperature  = 1.0
)

// Settings of the strategy: refine's, and how the temperature rises.
type Settings struct {
	search.Refining
	TemperatureStep *float64 `json:"temperature_step,omitempty"`
	MaxTemperature  *float64 `json:"max_temperature,omitempty"`
}

const schema = `{
  "type": "object",
  "properties": {
    ` + search.RefiningSchema + `,
    "temperature_step": {"type": "number", "exclusiveMinimum": 0},
    "max_temperature":  {"type": "number", "minimum": 0, "maximum": 2}
  },
  "additionalProperties": false
}`

// Strategy implements sdk.Strategy.
type Strategy struct {
	plan search.Plan
}

var _ sdk.Strategy = (*Strategy)(nil)

// New returns the strategy with its default settings.
func New() *Strategy {
	p, _ := Settings{}.plan()
	return &Strategy{plan: p}
}

// Info identifies the plugin.
func (*Strategy) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindStrategy, Name: "backtrack", Version: Version, ConfigSchema: schema,
		Description: "refinement that returns to the best kernel so far and raises the temperature when a turn regresses"}
}

func (s Settings) plan() (search.Plan, error) {
	p, err := s.Plan("backtrack")
	if err != nil {
		return p, err
	}
	p.Backtrack = true
	p.TemperatureStep, p.MaxTemperature = DefaultTemperatureStep, DefaultMaxTemperature
	if s.TemperatureStep != nil {
		p.TemperatureStep = *s.TemperatureStep
	}
	if s.MaxTemperature != nil {
		p.MaxTemperature = *s.MaxTemperature
	}
	switch {
	case p.TemperatureStep <= 0:
		return p, fmt.Errorf("%w: temperature_step must be above 0 (got %g)", sdk.ErrInvalidConfig, p.TemperatureStep)
	case p.MaxTemperature > 2:
		return p, fmt.Errorf("%w: max_temperature %g is above 2", sdk.ErrInvalidConfig, p.MaxTemperature)
	case p.MaxTemperature < p.Temperature:
		return p, fmt.Errorf("%w: max_temperature %g is below the starting temperature %g", sdk.ErrInvalidConfig, p.MaxTemperature, p.Temperature)
	}
	return p, nil
}

// Configure reads the settings.
func (s *Strategy) Configure(_ context.Context, c sdk.Configuration) error {
	var set Settings
	if err := c.Decode(&set); err != nil {
		return err
	}
	p, err := set.plan()
	if err != nil {
		return err
	}
	s.plan = p
	return nil
}

// Run refines, backtracking on regressions, for the configured turns or until a budget runs out.
func (s *Strategy) Run(ctx context.Context, req sdk.RunRequest, p sdk.Platform) (*sdk.RunResult, error) {
	return search.Refine(ctx, p, req, s.plan)
}
