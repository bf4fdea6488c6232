// Package strategytest runs a built-in strategy as the host would, minus the device: the strategy
// behind the real gRPC boundary, the cpp backend's real prompts and extraction, the openai
// plugin's real client talking to a scripted httptest chat server, and a scripted contract. Tests
// of the strategies use it to prove what reaches the model, and what the store would keep.
package strategytest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/kbplatform/kbplatform/plugins/backends/cpp"
	"github.com/kbplatform/kbplatform/plugins/models/openai"
	"github.com/kbplatform/kbplatform/plugins/models/openai/openaitest"
	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

// Judge decides a kernel's result from its source.
type Judge func(source string) *sdk.Result

// Platform is the host as the strategy sees it during a run.
type Platform struct {
	Task    sdk.Task
	Budget  sdk.Budget
	backend *cpp.Backend
	model   *openai.Model
	judge   Judge

	mu          sync.Mutex
	gens, evals int
	Attempts    []sdk.Attempt
	Evaluated   []string // sources, in evaluation order
}

// Reply writes the server's answer to one chat request, given the last user message.
type Reply func(n int, body map[string]any, lastUser string, w http.ResponseWriter)

// New starts a scripted chat server and the platform that asks it.
func New(t *testing.T, reply Reply, judge Judge) (*Platform, *openaitest.Server) {
	t.Helper()
	srv := openaitest.New(t, func(n int, body map[string]any, w http.ResponseWriter) {
		reply(n, body, LastUser(body), w)
	})
	m := openai.New()
	cfg := fmt.Sprintf(`{"base_url": %q, "model": "scripted"}`, srv.BaseURL())
	if err := m.Configure(context.Background(), sdk.Configuration{Raw: json.RawMessage(cfg)}); err != nil {
		t.Fatal(err)
	}
	return &Platform{Task: plugintest.SampleTask, backend: cpp.New(), model: m, judge: judge}, srv
}

// Run runs a strategy with settings behind the gRPC boundary, against the platform.
func Run(t *testing.T, s sdk.Strategy, settings string, p *Platform) *sdk.RunResult {
	t.Helper()
	r := plugintest.Connect(t, s)
	ctx := context.Background()
	if err := r.Configure(ctx, json.RawMessage(settings), nil); err != nil {
		t.Fatalf("configure %s: %v", settings, err)
	}
	res, err := r.Strategy().Run(ctx, sdk.RunRequest{Task: p.Task, Budget: p.Budget, Seed: 1}, p)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// LastUser is the content of a chat request's last user message.
func LastUser(body map[string]any) string {
	msgs, _ := body["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m, _ := msgs[i].(map[string]any)
		if m["role"] == "user" {
			s, _ := m["content"].(string)
			return s
		}
	}
	return ""
}

// Kernel is a reply holding a ModelNew whose forward carries a marker comment.
func Kernel(marker string) string {
	return "Here it is.\n```python\nimport torch\n\n\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n\n" +
		"    def forward(self, x):\n        return torch.relu(x)  # " + marker + "\n```\n"
}

// Marked reports whether a source carries the marker Kernel put there.
func Marked(source, marker string) bool { return strings.Contains(source, "# "+marker+"\n") }

// Prompt is the cpp backend's.
func (p *Platform) Prompt(ctx context.Context, variant, feedback string, history []sdk.Message) ([]sdk.Message, error) {
	return p.backend.Prompt(ctx, sdk.PromptRequest{Task: p.Task, Variant: variant, Feedback: feedback, History: history})
}

// Extract is the cpp backend's.
func (p *Platform) Extract(ctx context.Context, text string) (string, error) {
	return p.backend.Extract(ctx, text)
}

// Generate asks the scripted server through the openai plugin, within the budget.
func (p *Platform) Generate(ctx context.Context, req sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	p.mu.Lock()
	if b := p.Budget.Generations; b > 0 && p.gens+req.N > b {
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: %d of %d generations used, %d more asked", sdk.ErrBudgetExhausted, p.gens, b, req.N)
	}
	p.gens += req.N
	p.mu.Unlock()
	return p.model.Generate(ctx, req)
}

// Evaluate asks the judge, within the budget.
func (p *Platform) Evaluate(_ context.Context, source, _ string) (*sdk.Evaluation, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b := p.Budget.Evaluations; b > 0 && p.evals+1 > b {
		return nil, fmt.Errorf("%w: all %d evaluations used", sdk.ErrBudgetExhausted, b)
	}
	p.evals++
	p.Evaluated = append(p.Evaluated, source)
	res := p.judge(source)
	res.Kernel = sdk.Kernel{Hash: fmt.Sprintf("hash-%d", p.evals)}
	return &sdk.Evaluation{ID: fmt.Sprintf("eval-%d", p.evals), Result: res}, nil
}

// Record keeps the attempt.
func (p *Platform) Record(_ context.Context, a sdk.Attempt) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Attempts = append(p.Attempts, a)
	return fmt.Sprintf("attempt-%d", len(p.Attempts)), nil
}

// Kernels has none.
func (p *Platform) Kernels(context.Context, string, int) ([]sdk.Kernel, error) { return nil, nil }

// StoredKernels has none.
func (p *Platform) StoredKernels(context.Context, sdk.KernelQuery) ([]sdk.Kernel, error) {
	return nil, nil
}

// Pass is a correct kernel at a speedup, with a profile whose custom kernel is named.
func Pass(speedup float64, kernel string) *sdk.Result {
	return &sdk.Result{Verdict: sdk.Pass, Trials: []sdk.Trial{{OK: true}, {OK: true}},
		Timing: &sdk.Timing{Speedup: speedup, Candidate: sdk.Stats{Median: 1 / speedup}, Reference: sdk.Stats{Median: 1}},
		Profile: &sdk.Profile{Tool: "torch.profiler", TotalUS: 100, Kernels: []sdk.KernelTime{
			{Name: kernel, Calls: 1, TotalUS: 80, Share: 0.8, Custom: true},
			{Name: "aten::empty_like", Calls: 1, TotalUS: 20, Share: 0.2}}}}
}

// Mismatch is a wrong kernel: its last rows are wrong, as the contract would say.
func Mismatch() *sdk.Result {
	return &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassMismatch, Phase: "correctness",
		Trials: []sdk.Trial{{Seed: 1, Dist: "default"}},
		Mismatch: &sdk.Mismatch{Phase: "correctness", Seed: 1, Dist: "default", Kind: "values", Message: "values differ",
			Detail: map[string]any{"wrong": 512.0, "total": 4096.0, "wrong_fraction": 0.125, "max_abs_err": 3.5,
				"first_wrong_index": []any{56.0, 0.0}, "first_wrong_out": 0.0, "first_wrong_ref": 3.5,
				"pattern": map[string]any{"kind": "row_tail", "summary": "all wrong elements are in the last 8 of 64 rows (from row 56): a bounds or remainder bug?"}}}}
}
