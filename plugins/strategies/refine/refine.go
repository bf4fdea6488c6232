// Package refine is iterative refinement: N sequential turns, each prompt carrying feedback on
// the kernel of the turn before (its code, G; the contract's verdict with how and where it was
// wrong, E; the profile of a correct kernel, P), in one of three formats. With candidates > 1 a
// turn asks for several replies at a temperature above zero and the contract picks the one the
// next turn refines. The best kernel across turns counts, not the last.
package refine

import (
	"context"

	"github.com/kbplatform/kbplatform/plugins/strategies/internal/search"
	"github.com/kbplatform/kbplatform/sdk"
)

// Version of the strategy.
const Version = "0.1.0"

// Settings of the strategy.
type Settings = search.Refining

const schema = `{
  "type": "object",
  "properties": {
    ` + search.RefiningSchema + `
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
	p, _ := Settings{}.Plan("refine")
	return &Strategy{plan: p}
}

// Info identifies the plugin.
func (*Strategy) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindStrategy, Name: "refine", Version: Version, ConfigSchema: schema,
		Description: "sequential turns with feedback (G, G+E, G+E+P) on the previous kernel; the best across turns counts"}
}

// Configure reads the settings.
func (s *Strategy) Configure(_ context.Context, c sdk.Configuration) error {
	var set Settings
	if err := c.Decode(&set); err != nil {
		return err
	}
	p, err := set.Plan("refine")
	if err != nil {
		return err
	}
	s.plan = p
	return nil
}

// Run refines for the configured turns, or until a budget runs out.
func (s *Strategy) Run(ctx context.Context, req sdk.RunRequest, p sdk.Platform) (*sdk.RunResult, error) {
	return search.Refine(ctx, p, req, s.plan)
}
