package search

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/feedback"
)

// scripted is a Platform whose model answers from the prompt it is sent (so a test can prove
// what the feedback carried) and whose contract judges a kernel by the marker it contains.
type scripted struct {
	mu      sync.Mutex
	budget  sdk.Budget
	reply   func(call int, prompt string, n int) []string
	verdict map[string]*sdk.Result // marker in the source → result
	genErr  func(call int) error

	calls, gens, evals int
	prompts            []string
	histories          [][]sdk.Message
	temps              []float64
	attempts           []sdk.Attempt
}

func (s *scripted) Prompt(_ context.Context, variant, fb string, history []sdk.Message) ([]sdk.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.histories = append(s.histories, history)
	msgs := []sdk.Message{{Role: "system", Content: "system"}}
	msgs = append(msgs, history...)
	return append(msgs, sdk.Message{Role: "user", Content: "variant " + variant + "\n" + fb}), nil
}

func (s *scripted) Extract(_ context.Context, text string) (string, error) {
	_, code, ok := strings.Cut(text, "```python\n")
	if !ok {
		return "", fmt.Errorf("%w: none", sdk.ErrNoCode)
	}
	code, _, _ = strings.Cut(code, "```")
	return code, nil
}

func (s *scripted) Generate(_ context.Context, req sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.genErr != nil {
		if err := s.genErr(s.calls); err != nil {
			return nil, err
		}
	}
	if b := s.budget.Generations; b > 0 && s.gens+req.N > b {
		return nil, fmt.Errorf("%w: %d of %d generations used, %d more asked", sdk.ErrBudgetExhausted, s.gens, b, req.N)
	}
	s.gens += req.N
	last := req.Messages[len(req.Messages)-1].Content
	s.prompts = append(s.prompts, last)
	s.temps = append(s.temps, *req.Params.Temperature)
	resp := &sdk.GenerateResponse{Usage: sdk.Usage{PromptTokens: 100, CompletionTokens: 10 * int64(req.N)}, CallIDs: []string{fmt.Sprint("call", s.calls)}}
	for _, r := range s.reply(s.calls, last, req.N) {
		resp.Completions = append(resp.Completions, sdk.Completion{Text: r})
	}
	return resp, nil
}

func (s *scripted) Evaluate(_ context.Context, source, _ string) (*sdk.Evaluation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.budget.Evaluations; b > 0 && s.evals+1 > b {
		return nil, fmt.Errorf("%w: all %d evaluations used", sdk.ErrBudgetExhausted, b)
	}
	s.evals++
	res := &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassCompile, Message: "no marker"}
	for marker, r := range s.verdict {
		if strings.Contains(source, "# "+marker+"\n") {
			cp := *r
			res = &cp
		}
	}
	res.Kernel = sdk.Kernel{Hash: fmt.Sprint("hash-", s.evals)}
	return &sdk.Evaluation{ID: fmt.Sprint("eval-", s.evals), Result: res}, nil
}

func (s *scripted) Record(_ context.Context, a sdk.Attempt) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts = append(s.attempts, a)
	return fmt.Sprint("attempt-", len(s.attempts)), nil
}

func (s *scripted) Kernels(context.Context, string, int) ([]sdk.Kernel, error) { return nil, nil }
func (s *scripted) StoredKernels(context.Context, sdk.KernelQuery) ([]sdk.Kernel, error) {
	return nil, nil
}

func code(marker string) string {
	return "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x  # " + marker + "\n```\n"
}

func pass(speedup float64) *sdk.Result {
	return &sdk.Result{Verdict: sdk.Pass, Timing: &sdk.Timing{Speedup: speedup},
		Profile: &sdk.Profile{Tool: "torch.profiler", TotalUS: 10, Kernels: []sdk.KernelTime{{Name: "my_relu_kernel", Calls: 1, TotalUS: 10, Share: 1, Custom: true}}}}
}

func wrong(frac float64) *sdk.Result {
	return &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassMismatch, Mismatch: &sdk.Mismatch{Kind: "values",
		Detail: map[string]any{"wrong": frac * 100, "total": 100.0, "wrong_fraction": frac, "max_abs_err": 0.75,
			"pattern": map[string]any{"summary": "all wrong elements are in the last 2 of 8 rows"}}}}
}

func plan(t *testing.T, s Refining, backtrack bool) Plan {
	t.Helper()
	p, err := s.Plan("test")
	if err != nil {
		t.Fatal(err)
	}
	if backtrack {
		p.Backtrack, p.TemperatureStep, p.MaxTemperature = true, 0.2, 0.5
	}
	return p
}

func req() sdk.RunRequest { return sdk.RunRequest{Task: sdk.Task{ID: "t"}, Seed: 7} }

// E reaches the model: the reply of turn 1 depends on the mismatch detail of turn 0; P reaches
// it: the reply of turn 2 depends on the profile of turn 1. The trajectory keeps every piece.
func TestRefineFeedbackReachesTheModel(t *testing.T) {
	s := &scripted{
		verdict: map[string]*sdk.Result{"v0": wrong(0.25), "v1-fixed": pass(1.2), "v2-faster": pass(2.5)},
		reply: func(call int, prompt string, n int) []string {
			switch {
			case strings.Contains(prompt, "last 2 of 8 rows") && strings.Contains(prompt, "max abs error 0.75"):
				return []string{code("v1-fixed")}
			case strings.Contains(prompt, "| yours | my_relu_kernel"):
				return []string{code("v2-faster")}
			case call == 1:
				return []string{code("v0")}
			}
			return []string{code("no feedback seen")}
		},
	}
	res, err := Refine(context.Background(), s, req(), plan(t, Refining{Turns: 3, Feedback: "G+E+P"}, false))
	if err != nil {
		t.Fatal(err)
	}
	if res.BestEvaluation != "eval-3" || res.Attempts != 3 || res.Note != "" {
		t.Fatalf("result %+v", res)
	}
	for i, want := range []struct {
		parent          int
		kind, note, has string
	}{{-1, "none", "fail output_mismatch", ""}, {0, "raw G+E+P", "pass 1.2x", "# v0"}, {1, "raw G+E+P", "pass 2.5x", "# v1-fixed"}} {
		a := s.attempts[i]
		if a.Step != i || a.Turn != i || a.ParentStep != want.parent || a.FeedbackKind != want.kind || a.Note != want.note {
			t.Errorf("attempt %d: step %d turn %d parent %d kind %q note %q", i, a.Step, a.Turn, a.ParentStep, a.FeedbackKind, a.Note)
		}
		if !strings.Contains(a.Feedback, want.has) || (i == 0) != (a.Feedback == "") {
			t.Errorf("attempt %d feedback lacks %q:\n%s", i, want.has, a.Feedback)
		}
		if len(a.Prompt) == 0 || !strings.Contains(a.Prompt[len(a.Prompt)-1].Content, a.Feedback) || a.Completion == "" || a.EvaluationID == "" {
			t.Errorf("attempt %d lacks its prompt, reply or evaluation: %+v", i, a)
		}
		if a.PromptTokens != 100 || len(a.CallIDs) != 1 {
			t.Errorf("attempt %d: tokens %d calls %v", i, a.PromptTokens, a.CallIDs)
		}
	}
}

// Without E the model never sees the mismatch, and its reply does not change.
func TestRefineGOnlyHidesTheVerdict(t *testing.T) {
	s := &scripted{
		verdict: map[string]*sdk.Result{"v0": wrong(0.25), "v1-fixed": pass(1.2)},
		reply: func(call int, prompt string, n int) []string {
			if strings.Contains(prompt, "max abs error") {
				return []string{code("v1-fixed")}
			}
			return []string{code("v0")}
		},
	}
	res, err := Refine(context.Background(), s, req(), plan(t, Refining{Turns: 2, Feedback: "G"}, false))
	if err != nil {
		t.Fatal(err)
	}
	if res.BestEvaluation != "" || s.attempts[1].FeedbackKind != "raw G" || strings.Contains(s.attempts[1].Feedback, "output_mismatch") {
		t.Errorf("G alone leaked the verdict: %+v\n%s", res, s.attempts[1].Feedback)
	}
}

// The best kernel across turns counts, not the last.
func TestRefineKeepsTheBest(t *testing.T) {
	s := &scripted{
		verdict: map[string]*sdk.Result{"fast": pass(3), "slow": pass(1.1), "broken": wrong(1)},
		reply: func(call int, _ string, _ int) []string {
			return []string{code([]string{"slow", "fast", "broken", "slow"}[call-1])}
		},
	}
	res, err := Refine(context.Background(), s, req(), plan(t, Refining{Turns: 4}, false))
	if err != nil {
		t.Fatal(err)
	}
	if res.BestEvaluation != "eval-2" {
		t.Errorf("best %q, want the fast kernel's eval-2", res.BestEvaluation)
	}
	// refine (no backtracking) refines the latest kernel, even a worse one.
	if s.attempts[3].ParentStep != 2 {
		t.Errorf("turn 3 refines step %d, want 2", s.attempts[3].ParentStep)
	}
}

// Several candidates per turn: one call with n, every reply evaluated and recorded, the contract
// picks the one the next turn refines.
func TestRefineCandidates(t *testing.T) {
	s := &scripted{
		verdict: map[string]*sdk.Result{"a": wrong(0.5), "b": pass(1.5), "c": wrong(0.1), "d": pass(2)},
		reply: func(call int, prompt string, n int) []string {
			if n != 3 {
				t.Errorf("asked for %d candidates, want 3", n)
			}
			if call == 1 {
				return []string{code("a"), code("b"), code("c")}
			}
			return []string{code("c"), "no code here", code("d")}
		},
	}
	tp := 0.8
	res, err := Refine(context.Background(), s, req(), plan(t, Refining{Turns: 2, Candidates: 3, Prompting: Prompting{Temperature: &tp}}, false))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.attempts) != 6 || res.BestEvaluation != "eval-5" {
		t.Fatalf("%d attempts, best %q", len(s.attempts), res.BestEvaluation)
	}
	for i, a := range s.attempts {
		if a.Sample != i%3 || a.Turn != i/3 || a.Temperature != 0.8 {
			t.Errorf("attempt %d: turn %d sample %d temperature %g", i, a.Turn, a.Sample, a.Temperature)
		}
		// The call's tokens are counted once, on its first reply.
		if (a.PromptTokens != 0) != (a.Sample == 0) {
			t.Errorf("attempt %d: prompt tokens %d", i, a.PromptTokens)
		}
		if i >= 3 && a.ParentStep != 1 {
			t.Errorf("attempt %d refines step %d, want the passing candidate b (step 1)", i, a.ParentStep)
		}
	}
	if s.attempts[4].Failure != sdk.FailureNoCode || s.attempts[4].EvaluationID != "" {
		t.Errorf("reply without code: %+v", s.attempts[4])
	}
}

// ast-diff: the base kernel's exchange is the history; the feedback is what it changed.
func TestRefineASTDiffHistory(t *testing.T) {
	s := &scripted{
		verdict: map[string]*sdk.Result{"one": wrong(0.5), "two": wrong(0.2)},
		reply: func(call int, _ string, _ int) []string {
			m := []string{"one", "two", "three"}[call-1]
			return []string{strings.Replace(code(m), "return x", "return x + "+fmt.Sprint(call), 1)}
		},
	}
	if _, err := Refine(context.Background(), s, req(), plan(t, Refining{Turns: 3, Format: "ast-diff"}, false)); err != nil {
		t.Fatal(err)
	}
	h := s.histories[2]
	if len(h) != 2 || h[0].Role != "user" || h[1].Role != "assistant" || !strings.Contains(h[1].Content, "# two") {
		t.Fatalf("history of turn 2: %+v", h)
	}
	fb := s.attempts[2].Feedback
	if s.attempts[2].FeedbackKind != "ast-diff G+E" || !strings.Contains(fb, "-        return x + 1\n") || !strings.Contains(fb, "+        return x + 2\n") {
		t.Errorf("turn 2 feedback:\n%s", fb)
	}
	if len(s.histories[0]) != 0 {
		t.Errorf("the first prompt has history %+v", s.histories[0])
	}
}

// backtrack: a regression sends the next turn back to the best kernel, hotter, up to the cap.
func TestBacktrack(t *testing.T) {
	s := &scripted{
		verdict: map[string]*sdk.Result{"good": pass(2), "bad": wrong(0.5), "better": pass(3)},
		reply: func(call int, _ string, _ int) []string {
			return []string{code([]string{"good", "bad", "bad", "bad", "better", "bad"}[call-1])}
		},
	}
	res, err := Refine(context.Background(), s, req(), plan(t, Refining{Turns: 6}, true))
	if err != nil {
		t.Fatal(err)
	}
	if res.BestEvaluation != "eval-5" {
		t.Errorf("best %q", res.BestEvaluation)
	}
	wantTemps := []float64{0, 0, 0.2, 0.4, 0.5, 0.5}
	wantParents := []int{-1, 0, 0, 0, 0, 4}
	for i, a := range s.attempts {
		if fmt.Sprintf("%.2f", a.Temperature) != fmt.Sprintf("%.2f", wantTemps[i]) || a.ParentStep != wantParents[i] {
			t.Errorf("attempt %d: temperature %g parent %d, want %g %d", i, a.Temperature, a.ParentStep, wantTemps[i], wantParents[i])
		}
	}
	if fb := s.attempts[2].Feedback; !strings.Contains(fb, "Your attempt of turn 1 did worse") || !strings.Contains(fb, "# good") || strings.Contains(fb, "# bad") {
		t.Errorf("turn 2 should go back to the good kernel:\n%s", fb)
	}
}

// contrastive backtracking: the best so far beside the failure that was just left behind.
func TestBacktrackContrastive(t *testing.T) {
	s := &scripted{
		verdict: map[string]*sdk.Result{"good": pass(2), "bad": wrong(0.5)},
		reply: func(call int, _ string, _ int) []string {
			return []string{code([]string{"good", "bad", "bad"}[call-1])}
		},
	}
	if _, err := Refine(context.Background(), s, req(), plan(t, Refining{Turns: 3, Format: "contrastive", Python: "/nonexistent"}, true)); err != nil {
		t.Fatal(err)
	}
	fb := s.attempts[2].Feedback
	if !strings.Contains(fb, "best kernel so far (turn 0)") || !strings.Contains(fb, "latest kernel (turn 1), which did worse") ||
		!strings.Contains(fb, "+        return x  # bad") || s.attempts[2].ParentStep != 0 {
		t.Errorf("turn 2 (parent %d):\n%s", s.attempts[2].ParentStep, fb)
	}
}

// Budgets: the run stops cleanly, says why, and keeps the best so far.
func TestBudget(t *testing.T) {
	reply := func(call int, _ string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = code(fmt.Sprintf("k%d%d", call, i))
		}
		return out
	}
	t.Run("generations", func(t *testing.T) {
		s := &scripted{budget: sdk.Budget{Generations: 2}, reply: reply, verdict: map[string]*sdk.Result{"k10": pass(1.5)}}
		res, err := Refine(context.Background(), s, req(), plan(t, Refining{Turns: 5}, false))
		if err != nil {
			t.Fatal(err)
		}
		if res.Attempts != 2 || len(s.attempts) != 2 || res.BestEvaluation != "eval-1" || !strings.Contains(res.Note, "budget exhausted") {
			t.Errorf("result %+v, %d attempts", res, len(s.attempts))
		}
	})
	t.Run("evaluations", func(t *testing.T) {
		tp := 1.0
		s := &scripted{budget: sdk.Budget{Evaluations: 2}, reply: reply, verdict: map[string]*sdk.Result{"k11": pass(1.5)}}
		res, err := Refine(context.Background(), s, req(), plan(t, Refining{Turns: 5, Candidates: 3, Prompting: Prompting{Temperature: &tp}}, false))
		if err != nil {
			t.Fatal(err)
		}
		// Three replies came back; two were evaluated, the third is kept unevaluated.
		if res.Attempts != 3 || s.gens != 3 || res.BestEvaluation != "eval-2" || !strings.Contains(res.Note, "evaluations used") {
			t.Fatalf("result %+v, %d generations", res, s.gens)
		}
		if a := s.attempts[2]; a.EvaluationID != "" || a.Completion == "" || !strings.Contains(a.Note, "budget exhausted") {
			t.Errorf("unevaluated reply: %+v", a)
		}
	})
	t.Run("fewer generations than candidates", func(t *testing.T) {
		s := &scripted{budget: sdk.Budget{Generations: 2}, reply: reply}
		tp := 1.0
		res, err := Refine(context.Background(), s, req(), plan(t, Refining{Turns: 2, Candidates: 3, Prompting: Prompting{Temperature: &tp}}, false))
		if err != nil {
			t.Fatal(err)
		}
		if res.Attempts != 2 || s.gens != 2 || !strings.Contains(res.Note, "budget exhausted") {
			t.Errorf("result %+v, %d generations", res, s.gens)
		}
	})
	t.Run("nothing allowed", func(t *testing.T) {
		s := &scripted{budget: sdk.Budget{Generations: 0, Evaluations: 0}, reply: reply, genErr: func(int) error {
			return fmt.Errorf("%w: 0 of 0 tokens left", sdk.ErrBudgetExhausted)
		}}
		res, err := Refine(context.Background(), s, req(), plan(t, Refining{Turns: 3}, false))
		if err != nil {
			t.Fatal(err)
		}
		// One attempt says why the run did nothing.
		if res.Attempts != 1 || len(s.attempts) != 1 || s.attempts[0].Failure != "" || !strings.Contains(s.attempts[0].Note, "tokens left") {
			t.Errorf("result %+v attempts %+v", res, s.attempts)
		}
	})
}

// A transient failure fails the run (a resumed study tries again); a final one ends it cleanly.
func TestModelFailures(t *testing.T) {
	reply := func(call int, _ string, _ int) []string { return []string{code("ok")} }
	s := &scripted{reply: reply, verdict: map[string]*sdk.Result{"ok": pass(1)}, genErr: func(call int) error {
		if call == 2 {
			return fmt.Errorf("%w: slow down", sdk.ErrRateLimited)
		}
		return nil
	}}
	if _, err := Refine(context.Background(), s, req(), plan(t, Refining{Turns: 3}, false)); !errors.Is(err, sdk.ErrRateLimited) {
		t.Errorf("transient failure: %v", err)
	}
	s = &scripted{reply: reply, verdict: map[string]*sdk.Result{"ok": pass(1)}, genErr: func(call int) error {
		if call == 2 {
			return fmt.Errorf("%w: the prompt is too long", sdk.ErrContextLength)
		}
		return nil
	}}
	res, err := Refine(context.Background(), s, req(), plan(t, Refining{Turns: 3}, false))
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 2 || res.BestEvaluation != "eval-1" || s.attempts[1].Failure != sdk.FailureContextLength || s.attempts[1].ParentStep != 0 || s.calls != 2 {
		t.Errorf("result %+v attempts %+v", res, s.attempts)
	}
}

func TestRank(t *testing.T) {
	ev := func(r *sdk.Result) *Candidate {
		return &Candidate{Source: "x", Eval: &sdk.Evaluation{ID: "e", Result: r}}
	}
	crash := &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassCrash}
	compile := &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassCompile}
	platform := &sdk.Result{Verdict: sdk.VerdictError, ErrorClass: sdk.ClassPlatform}
	// Best first.
	order := []*Candidate{ev(pass(2)), ev(pass(1.5)), ev(wrong(0.1)), ev(wrong(0.6)), ev(crash), ev(compile), ev(platform), {Reply: "no code"}}
	for i := 0; i+1 < len(order); i++ {
		if !Better(order[i], order[i+1]) || Better(order[i+1], order[i]) {
			t1, s1 := Rank(order[i])
			t2, s2 := Rank(order[i+1])
			t.Errorf("%d (%d %g) should rank above %d (%d %g)", i, t1, s1, i+1, t2, s2)
		}
	}
	if Better(ev(pass(2)), ev(pass(2))) {
		t.Error("equals are not better")
	}
	if got := Pick([]*Candidate{order[3], order[1], ev(pass(1.5))}); got != order[1] {
		t.Error("Pick: the earliest of the best")
	}
}

func TestPlan(t *testing.T) {
	hot, cold := 0.9, 0.0
	for _, c := range []struct {
		name string
		s    Refining
		err  string
	}{
		{"defaults", Refining{}, ""},
		{"candidates at zero temperature", Refining{Candidates: 2, Prompting: Prompting{Temperature: &cold}}, "temperature above 0"},
		{"candidates default temperature", Refining{Candidates: 2}, "temperature above 0"},
		{"candidates hot", Refining{Candidates: 4, Prompting: Prompting{Temperature: &hot}}, ""},
		{"feedback", Refining{Feedback: "E"}, "feedback \"E\""},
		{"format", Refining{Format: "json"}, "format \"json\""},
		{"turns", Refining{Turns: -1}, "turns must be at least 1"},
		{"chain of thought", Refining{Prompting: Prompting{ChainOfThought: true}}, ""},
		{"chain of thought and few-shot", Refining{Prompting: Prompting{ChainOfThought: true, Variant: "few-shot"}}, "cannot be combined"},
		{"variant", Refining{Prompting: Prompting{Variant: "two-shot"}}, "variant \"two-shot\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := c.s.Plan("x")
			if c.err == "" {
				if err != nil || p.Turns < 1 || p.Candidates < 1 || p.Builder.Parts == "" || p.Builder.Format == "" {
					t.Errorf("plan %+v err %v", p, err)
				}
				return
			}
			if err == nil || !errors.Is(err, sdk.ErrInvalidConfig) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("err %v, want %q", err, c.err)
			}
		})
	}
	p, _ := Refining{Prompting: Prompting{ChainOfThought: true}}.Plan("x")
	if p.Variant != sdk.VariantChainOfThought || p.Builder.Format != feedback.Raw || p.Builder.Parts != feedback.GE {
		t.Errorf("plan %+v", p)
	}
}
