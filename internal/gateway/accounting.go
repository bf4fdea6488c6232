package gateway

import (
	"sort"

	"github.com/kbplatform/kbplatform/internal/store"
)

// CostLine sums a study's calls for one model and strategy.
type CostLine struct {
	Model            string  `json:"model"`
	Strategy         string  `json:"strategy"`
	Calls            int     `json:"calls"`
	Cached           int     `json:"cached"` // served from the cache: not paid again
	Failed           int     `json:"failed"`
	PromptTokens     int64   `json:"prompt_tokens"`     // paid for: cache hits are left out
	CompletionTokens int64   `json:"completion_tokens"` // paid for
	ReasoningTokens  int64   `json:"reasoning_tokens"`  // part of CompletionTokens
	CostUSD          float64 `json:"cost_usd"`
	Unpriced         int     `json:"unpriced"` // paid calls the price table has no price for
}

// Costs sums call records per model and strategy, sorted by model then strategy; the last line
// is the total (model and strategy "*") when there is more than one.
func Costs(calls []store.CallRecord) []CostLine {
	by := map[[2]string]*CostLine{}
	total := &CostLine{Model: "*", Strategy: "*"}
	for _, c := range calls {
		k := [2]string{c.Model, c.Strategy}
		l := by[k]
		if l == nil {
			l = &CostLine{Model: c.Model, Strategy: c.Strategy}
			by[k] = l
		}
		for _, l := range []*CostLine{l, total} {
			l.Calls++
			switch {
			case c.Cached:
				l.Cached++
				continue
			case c.Error != "":
				l.Failed++
			}
			l.PromptTokens += c.Usage.PromptTokens
			l.CompletionTokens += c.Usage.CompletionTokens
			l.ReasoningTokens += c.Usage.ReasoningTokens
			l.CostUSD += c.CostUSD
			if !c.Priced && c.Error == "" {
				l.Unpriced++
			}
		}
	}
	out := make([]CostLine, 0, len(by)+1)
	for _, l := range by {
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Model != out[j].Model {
			return out[i].Model < out[j].Model
		}
		return out[i].Strategy < out[j].Strategy
	})
	if len(out) > 1 {
		out = append(out, *total)
	}
	return out
}
