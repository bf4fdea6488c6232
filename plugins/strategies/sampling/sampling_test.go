package sampling

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/plugins/models/openai/openaitest"
	"github.com/kbplatform/kbplatform/plugins/strategies/internal/strategytest"
	"github.com/kbplatform/kbplatform/sdk"
)

// k samples are one request with n=k at the temperature, with the chain-of-thought prompt; all
// replies are evaluated, the best correct one counts.
func TestSamples(t *testing.T) {
	p, srv := strategytest.New(t, func(n int, body map[string]any, user string, w http.ResponseWriter) {
		if openaitest.N(body) != 4 || body["temperature"] != 0.6 || !strings.Contains(user, "Reasoning") {
			t.Errorf("request %d: n %v temperature %v, chain of thought %v", n, body["n"], body["temperature"], strings.Contains(user, "Reasoning"))
		}
		openaitest.Completion(w, nil, strategytest.Kernel("s0"), "no code, sorry", strategytest.Kernel("s2"), strategytest.Kernel("s3"))
	}, func(src string) *sdk.Result {
		switch {
		case strategytest.Marked(src, "s2"):
			return strategytest.Pass(1.1, "k")
		case strategytest.Marked(src, "s3"):
			return strategytest.Pass(2.2, "k")
		}
		return strategytest.Mismatch()
	})
	res := strategytest.Run(t, New(), `{"k": 4, "temperature": 0.6, "chain_of_thought": true}`, p)
	if srv.Requests() != 1 || res.Attempts != 4 || len(p.Evaluated) != 3 || res.BestEvaluation != "eval-3" {
		t.Fatalf("%d requests, %d evaluations, result %+v", srv.Requests(), len(p.Evaluated), res)
	}
	for i, a := range p.Attempts {
		if a.Sample != i || a.Turn != 0 || a.ParentStep != -1 || a.FeedbackKind != "none" || a.Temperature != 0.6 || len(a.Prompt) != 2 {
			t.Errorf("attempt %d: %+v", i, a)
		}
	}
	if p.Attempts[1].Failure != sdk.FailureNoCode {
		t.Errorf("the reply without code: %+v", p.Attempts[1])
	}
}

// A budget smaller than k: as many samples as it allows, one request each, each its own seed.
func TestBudgetSmallerThanK(t *testing.T) {
	var seeds []any
	p, srv := strategytest.New(t, func(n int, body map[string]any, _ string, w http.ResponseWriter) {
		seeds = append(seeds, body["seed"])
		openaitest.Completion(w, nil, strategytest.Kernel("s"))
	}, func(string) *sdk.Result { return strategytest.Pass(1, "k") })
	p.Budget = sdk.Budget{Generations: 3}
	res := strategytest.Run(t, New(), `{"k": 8}`, p)
	if srv.Requests() != 3 || res.Attempts != 3 || res.BestEvaluation != "eval-1" {
		t.Fatalf("%d requests, result %+v", srv.Requests(), res)
	}
	if len(seeds) != 3 || seeds[0] == seeds[1] || seeds[1] == seeds[2] {
		t.Errorf("seeds %v: each single sample needs its own", seeds)
	}
}

func TestSettings(t *testing.T) {
	for _, c := range []struct {
		settings string
		ok       bool
	}{
		{`{}`, true},
		{`{"k": 1, "temperature": 0}`, true},
		{`{"k": 4, "temperature": 0}`, false},
		{`{"k": -1}`, false},
		{`{"k": 4, "feedback": "G"}`, false},
		{`{"variant": "hardware-aware", "chain_of_thought": true}`, false},
	} {
		err := New().Configure(context.Background(), sdk.Configuration{Raw: json.RawMessage(c.settings)})
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, sdk.ErrInvalidConfig)) {
			t.Errorf("%s: %v", c.settings, err)
		}
	}
}
