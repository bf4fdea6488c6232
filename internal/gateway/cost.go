package gateway

import "github.com/kbplatform/kbplatform/sdk"

// Price is what a model's tokens cost, in US dollars per million tokens.
type Price struct {
	Input  float64 `json:"input" yaml:"input"`
	Output float64 `json:"output" yaml:"output"`
	// CachedInput is the rate of prompt tokens the provider served from its prompt cache
	// (0: the input rate).
	CachedInput float64 `json:"cached_input" yaml:"cached_input"`
}

// Prices maps model names to prices: a study's model name (vllm:qwen-coder), the name the
// provider reports (gpt-5-2025-08-07) or the name in the settings (gpt-5).
type Prices map[string]Price

// Cost prices usage under the first name the table knows; ok is false when none is known.
func (p Prices) Cost(u sdk.Usage, names ...string) (usd float64, ok bool) {
	for _, n := range names {
		if pr, found := p[n]; found && n != "" {
			return pr.cost(u), true
		}
	}
	return 0, false
}

func (pr Price) cost(u sdk.Usage) float64 {
	cachedRate := pr.CachedInput
	if cachedRate == 0 {
		cachedRate = pr.Input
	}
	fresh := u.PromptTokens - u.CachedPromptTokens
	return (float64(fresh)*pr.Input + float64(u.CachedPromptTokens)*cachedRate + float64(u.CompletionTokens)*pr.Output) / 1e6
}

// Price is what a reply's usage costs at this model's prices (0 when unpriced), whether it came
// from the provider or from the cache: a study's dollar budget counts what each arm's calls are
// worth, so that a resumed or cached study keeps the budgets of a fresh one equal.
func (g *Gateway) Price(resp *sdk.GenerateResponse) float64 {
	if resp == nil {
		return 0
	}
	usd, _ := g.o.Prices.Cost(resp.Usage, g.o.Name, resp.Model, g.provider)
	return usd
}
