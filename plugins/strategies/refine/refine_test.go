package refine

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

// The chat server answers what the feedback told it: the first kernel is wrong in its last rows;
// a prompt that says so (E) gets a fixed kernel; a prompt with that kernel's profile (P) gets a
// faster one. Anything else gets a kernel that proves the feedback was missing.
func TestFeedbackReachesTheModel(t *testing.T) {
	p, srv := strategytest.New(t, func(n int, _ map[string]any, user string, w http.ResponseWriter) {
		switch {
		case n == 1:
			openaitest.Completion(w, nil, strategytest.Kernel("first"))
		case strings.Contains(user, "last 8 of 64 rows") && strings.Contains(user, "max abs error 3.5") && strings.Contains(user, "# first"):
			openaitest.Completion(w, nil, strategytest.Kernel("fixed"))
		case strings.Contains(user, "| 80% | 80 | 1 | yours | relu_rows_kernel |") && strings.Contains(user, "1.5x"):
			openaitest.Completion(w, nil, strategytest.Kernel("faster"))
		default:
			openaitest.Completion(w, nil, strategytest.Kernel("blind"))
		}
	}, func(src string) *sdk.Result {
		switch {
		case strategytest.Marked(src, "fixed"):
			return strategytest.Pass(1.5, "relu_rows_kernel")
		case strategytest.Marked(src, "faster"):
			return strategytest.Pass(4, "relu_vector_kernel")
		}
		return strategytest.Mismatch()
	})
	res := strategytest.Run(t, New(), `{"turns": 3, "feedback": "G+E+P", "chain_of_thought": true}`, p)
	if srv.Requests() != 3 || res.Attempts != 3 || res.BestEvaluation != "eval-3" {
		t.Fatalf("%d requests, result %+v", srv.Requests(), res)
	}
	for i, marker := range []string{"first", "fixed", "faster"} {
		if !strategytest.Marked(p.Evaluated[i], marker) {
			t.Errorf("turn %d evaluated %q, want the %s kernel", i, p.Evaluated[i], marker)
		}
		a := p.Attempts[i]
		if a.Turn != i || a.ParentStep != i-1 || len(a.Prompt) != 2 || !strings.Contains(a.Prompt[1].Content, "Reasoning") {
			t.Errorf("attempt %d: turn %d parent %d prompt %d messages", i, a.Turn, a.ParentStep, len(a.Prompt))
		}
		if i > 0 && (a.FeedbackKind != "raw G+E+P" || !strings.Contains(a.Prompt[1].Content, a.Feedback)) {
			t.Errorf("attempt %d: kind %q; its prompt lacks its feedback", i, a.FeedbackKind)
		}
	}
}

// The same server, G only: the model never learns what was wrong and never fixes it.
func TestWithoutErrorsTheModelIsBlind(t *testing.T) {
	p, srv := strategytest.New(t, func(n int, _ map[string]any, user string, w http.ResponseWriter) {
		if strings.Contains(user, "last 8 of 64 rows") {
			openaitest.Completion(w, nil, strategytest.Kernel("fixed"))
			return
		}
		openaitest.Completion(w, nil, strategytest.Kernel("blind"))
	}, func(src string) *sdk.Result {
		if strategytest.Marked(src, "fixed") {
			return strategytest.Pass(1.5, "k")
		}
		return strategytest.Mismatch()
	})
	res := strategytest.Run(t, New(), `{"turns": 2, "feedback": "G"}`, p)
	if srv.Requests() != 2 || res.BestEvaluation != "" || !strings.Contains(p.Attempts[1].Feedback, "# blind") {
		t.Errorf("%d requests, result %+v", srv.Requests(), res)
	}
}

// Candidates: one request per turn asks for n at the temperature; the server's best reply is
// the one the next turn is told about.
func TestCandidatesAtTemperature(t *testing.T) {
	p, srv := strategytest.New(t, func(n int, body map[string]any, user string, w http.ResponseWriter) {
		if openaitest.N(body) != 3 || body["temperature"] != 0.9 {
			t.Errorf("request %d: n %v temperature %v", n, body["n"], body["temperature"])
		}
		if n == 1 {
			openaitest.Completion(w, nil, strategytest.Kernel("a"), strategytest.Kernel("b"), strategytest.Kernel("c"))
			return
		}
		if !strings.Contains(user, "# b") || strings.Contains(user, "# a\n") {
			t.Errorf("turn 1 is not told about the correct candidate b:\n%s", user)
		}
		openaitest.Completion(w, nil, strategytest.Kernel("d"), strategytest.Kernel("e"), strategytest.Kernel("f"))
	}, func(src string) *sdk.Result {
		if strategytest.Marked(src, "b") {
			return strategytest.Pass(1.2, "k")
		}
		return strategytest.Mismatch()
	})
	p.Budget = sdk.Budget{Generations: 6}
	res := strategytest.Run(t, New(), `{"turns": 2, "candidates": 3, "temperature": 0.9}`, p)
	if srv.Requests() != 2 || res.Attempts != 6 || res.BestEvaluation != "eval-2" {
		t.Fatalf("%d requests, result %+v", srv.Requests(), res)
	}
	if a := p.Attempts[4]; a.Turn != 1 || a.Sample != 1 || a.ParentStep != 1 || a.Temperature != 0.9 {
		t.Errorf("attempt 4: %+v", a)
	}
}

func TestSettings(t *testing.T) {
	for _, c := range []struct {
		settings string
		ok       bool
	}{
		{`{}`, true},
		{`{"turns": 10, "feedback": "G+E+P", "format": "ast-diff", "candidates": 4, "temperature": 0.8, "variant": "few-shot"}`, true},
		{`{"turns": 3, "candidates": 2}`, false}, // several candidates at temperature 0
		{`{"feedback": "E"}`, false},
		{`{"format": "diff"}`, false},
		{`{"temperature_step": 0.2}`, false}, // backtrack's, not refine's
		{`{"chain_of_thought": true, "variant": "hardware-aware"}`, false},
		{`{"turns": "three"}`, false},
	} {
		err := New().Configure(context.Background(), sdk.Configuration{Raw: json.RawMessage(c.settings)})
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, sdk.ErrInvalidConfig)) {
			t.Errorf("%s: %v", c.settings, err)
		}
	}
}
