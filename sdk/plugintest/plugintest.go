// Package plugintest holds the conformance suites every kbplatform plugin passes, built-in and
// third-party alike. Each suite serves the implementation behind a real gRPC connection (the same
// code path the host uses) and checks the kind's contract:
//
//	func TestConformance(t *testing.T) {
//		plugintest.RunStrategyConformance(t, mystrategy.New(), nil)
//	}
package plugintest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kbplatform/kbplatform/internal/pluginhost"
	"github.com/kbplatform/kbplatform/sdk"
)

// Remote is a connected plugin as the host sees it.
type Remote interface {
	Info() sdk.Info
	// Configure sends the settings; platform, when not nil, is served to the plugin.
	Configure(ctx context.Context, raw json.RawMessage, platform sdk.Platform) error
	Model() sdk.Model
	Backend() sdk.Backend
	Strategy() sdk.Strategy
	Target() sdk.Target
}

// pair serves impl with the SDK and dials it with kbplatform's own host client, over one
// in-process connection.
type pair struct {
	plugin.NetRPCUnsupportedPlugin
	serve *sdk.GRPCPlugin
}

func (p pair) GRPCServer(b *plugin.GRPCBroker, s *grpc.Server) error { return p.serve.GRPCServer(b, s) }

func (p pair) GRPCClient(ctx context.Context, b *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pluginhost.GRPCPlugin{}.GRPCClient(ctx, b, c)
}

// Connect serves impl over an in-process gRPC connection and returns the host's view of it: the
// same client kbplatform uses for a plugin process.
func Connect(t testing.TB, impl sdk.Plugin) Remote {
	t.Helper()
	client, server := plugin.TestPluginGRPCConn(t, false, plugin.PluginSet{sdk.PluginKey: pair{serve: &sdk.GRPCPlugin{Impl: impl}}})
	t.Cleanup(func() {
		client.Close()
		server.Stop()
	})
	raw, err := client.Dispense(sdk.PluginKey)
	if err != nil {
		t.Fatalf("dispense: %v", err)
	}
	return raw.(*pluginhost.Remote)
}

// checkBase is what every kind must get right: identity, settings.
func checkBase(t *testing.T, r Remote, kind string, config json.RawMessage) {
	t.Helper()
	info := r.Info()
	t.Run("info", func(t *testing.T) {
		if info.Kind != kind {
			t.Errorf("Info().Kind = %q, want %q", info.Kind, kind)
		}
		if info.Name == "" || strings.ContainsAny(info.Name, "/ \t") {
			t.Errorf("Info().Name = %q: want a non-empty name without slashes or spaces", info.Name)
		}
		if info.Version == "" {
			t.Error("Info().Version is empty")
		}
		if info.Protocol != sdk.Protocol {
			t.Errorf("protocol %d, want %d", info.Protocol, sdk.Protocol)
		}
		if info.ConfigSchema != "" && !json.Valid([]byte(info.ConfigSchema)) {
			t.Error("Info().ConfigSchema is not valid JSON")
		}
	})
	t.Run("rejects unknown settings", func(t *testing.T) {
		err := r.Configure(context.Background(), json.RawMessage(`{"surely_not_a_setting_of_this_plugin": 1}`), nil)
		if !errors.Is(err, sdk.ErrInvalidConfig) {
			t.Errorf("Configure with an unknown key: got %v, want an error wrapping sdk.ErrInvalidConfig", err)
		}
	})
	if err := r.Configure(context.Background(), config, nil); err != nil {
		t.Fatalf("Configure(%s): %v", string(config), err)
	}
}

// RunModelConformance checks a model: n completions, argument errors, cancellation.
// config must make the model answer for task "kbp/l1/relu" (a replaying model needs a kernel for it).
func RunModelConformance(t *testing.T, impl sdk.Model, config json.RawMessage) {
	r := Connect(t, impl)
	checkBase(t, r, sdk.KindModel, config)
	m := r.Model()
	ctx := context.Background()
	req := sdk.GenerateRequest{Messages: []sdk.Message{{Role: "user", Content: "Write ModelNew for relu."}}, N: 2, TaskID: "kbp/l1/relu"}
	t.Run("n completions", func(t *testing.T) {
		resp, err := m.Generate(ctx, req)
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		if len(resp.Completions) != 2 {
			t.Fatalf("asked for 2 completions, got %d", len(resp.Completions))
		}
		for i, c := range resp.Completions {
			if strings.TrimSpace(c.Text) == "" {
				t.Errorf("completion %d is empty", i)
			}
		}
	})
	t.Run("n < 1 is invalid", func(t *testing.T) {
		bad := req
		bad.N = 0
		if _, err := m.Generate(ctx, bad); !errors.Is(err, sdk.ErrInvalidArgument) {
			t.Errorf("N=0: got %v, want sdk.ErrInvalidArgument", err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		c, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := m.Generate(c, req); err == nil {
			t.Error("Generate with a cancelled context succeeded")
		}
	})
}

// SampleTask is a small task for backend and target suites.
var SampleTask = sdk.Task{ID: "plugintest/relu", Name: "ReLU", Level: 1, Size: "default", Distributions: []string{"default", "scaled"},
	Source: `import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


batch_size = 16
dim = 256


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
`}

func init() { SampleTask.Hash = hashOf(SampleTask.Source) }

// declaredVariants are the prompt variants a backend lists among its capabilities; one-shot is
// required of every backend.
func declaredVariants(info sdk.Info) []string {
	out := []string{sdk.VariantOneShot}
	for _, c := range info.Capabilities {
		if c != sdk.VariantOneShot && slices.Contains(sdk.Variants(), c) {
			out = append(out, c)
		}
	}
	return out
}

// RunBackendConformance checks a backend: prompts that carry the task, extraction, checks, recipe.
// reply is a model reply in the backend's language whose code the backend must extract.
func RunBackendConformance(t *testing.T, impl sdk.Backend, config json.RawMessage, reply string) {
	r := Connect(t, impl)
	checkBase(t, r, sdk.KindBackend, config)
	b := r.Backend()
	ctx := context.Background()
	t.Run("prompt carries the task", func(t *testing.T) {
		for _, v := range declaredVariants(r.Info()) {
			msgs, err := b.Prompt(ctx, sdk.PromptRequest{Task: SampleTask, Variant: v, Hardware: &sdk.Hardware{Target: "test", Devices: []sdk.Device{{Name: "cpu", Kind: "cpu"}}}})
			if err != nil {
				t.Fatalf("Prompt(%s): %v", v, err)
			}
			var all strings.Builder
			for _, m := range msgs {
				all.WriteString(m.Content)
			}
			if !strings.Contains(all.String(), "class Model(nn.Module)") || !strings.Contains(all.String(), "ModelNew") {
				t.Errorf("Prompt(%s) does not show the task's Model or ask for ModelNew", v)
			}
			if msgs[len(msgs)-1].Role != "user" {
				t.Errorf("Prompt(%s): the last message should be the user's", v)
			}
		}
		if _, err := b.Prompt(ctx, sdk.PromptRequest{Task: SampleTask, Variant: "no-such-variant"}); !errors.Is(err, sdk.ErrInvalidArgument) {
			t.Errorf("unknown variant: got %v, want sdk.ErrInvalidArgument", err)
		}
	})
	t.Run("extract", func(t *testing.T) {
		src, err := b.Extract(ctx, reply)
		if err != nil {
			t.Fatalf("Extract: %v", err)
		}
		if !strings.Contains(src, "ModelNew") || strings.Contains(src, "```") {
			t.Errorf("Extract returned %q", src)
		}
		if _, err := b.Extract(ctx, "I cannot help with that."); !errors.Is(err, sdk.ErrNoCode) {
			t.Errorf("Extract without code: got %v, want sdk.ErrNoCode", err)
		}
	})
	t.Run("check", func(t *testing.T) {
		issues, err := b.Check(ctx, "import torch\n", SampleTask)
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		hasError := false
		for _, i := range issues {
			if i.Severity == sdk.SeverityError {
				hasError = true
			}
			if i.Severity != sdk.SeverityError && i.Severity != sdk.SeverityWarning {
				t.Errorf("issue severity %q", i.Severity)
			}
		}
		if !hasError {
			t.Error("Check of a file without ModelNew reported no error")
		}
	})
	t.Run("recipe", func(t *testing.T) {
		if _, err := b.Recipe(ctx, &sdk.Hardware{Target: "test"}); err != nil {
			t.Errorf("Recipe: %v", err)
		}
	})
}

// FakePlatform is a recording Platform with a budget, for strategy tests.
type FakePlatform struct {
	Replies     []string // completions handed out in order (cycled)
	Pass        func(source string) bool
	Budget      sdk.Budget
	mu          sync.Mutex
	Generations int
	Evaluations int
	Attempts    []sdk.Attempt
}

func (f *FakePlatform) Prompt(_ context.Context, variant, _ string, _ []sdk.Message) ([]sdk.Message, error) {
	return []sdk.Message{{Role: "user", Content: "prompt " + variant + "\n" + SampleTask.Source}}, nil
}

func (f *FakePlatform) Extract(_ context.Context, text string) (string, error) {
	i := strings.Index(text, "```python\n")
	if i < 0 {
		return "", sdk.ErrNoCode
	}
	rest := text[i+len("```python\n"):]
	j := strings.Index(rest, "```")
	if j < 0 {
		return "", sdk.ErrNoCode
	}
	return rest[:j], nil
}

func (f *FakePlatform) Generate(_ context.Context, req sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.N < 1 {
		return nil, sdk.ErrInvalidArgument
	}
	if f.Budget.Generations > 0 && f.Generations+req.N > f.Budget.Generations {
		return nil, sdk.ErrBudgetExhausted
	}
	resp := &sdk.GenerateResponse{Model: "fake"}
	for i := 0; i < req.N; i++ {
		resp.Completions = append(resp.Completions, sdk.Completion{Text: f.Replies[(f.Generations+i)%len(f.Replies)]})
	}
	f.Generations += req.N
	return resp, nil
}

func (f *FakePlatform) Evaluate(_ context.Context, source, _ string) (*sdk.Evaluation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Budget.Evaluations > 0 && f.Evaluations+1 > f.Budget.Evaluations {
		return nil, sdk.ErrBudgetExhausted
	}
	f.Evaluations++
	res := &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassMismatch, Kernel: sdk.Kernel{Hash: hashOf(source)}}
	if f.Pass != nil && f.Pass(source) {
		res.Verdict, res.ErrorClass = sdk.Pass, ""
		res.Timing = &sdk.Timing{Speedup: 1.5}
	}
	return &sdk.Evaluation{ID: "eval-" + string(rune('a'+f.Evaluations-1)), Result: res}, nil
}

func (f *FakePlatform) Record(_ context.Context, a sdk.Attempt) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Attempts = append(f.Attempts, a)
	return "attempt", nil
}

func (f *FakePlatform) Kernels(context.Context, string, int) ([]sdk.Kernel, error) { return nil, nil }

func (f *FakePlatform) StoredKernels(context.Context, sdk.KernelQuery) ([]sdk.Kernel, error) {
	return nil, nil
}

// GoodReply is a reply with a code block that the fake platform's evaluation passes.
const GoodReply = "Here:\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)  # good\n```\n"

// BadReply has no code.
const BadReply = "I would rather not."

// RunStrategyConformance checks a strategy against the fake platform: it stays inside its budget,
// records an attempt for every evaluation, survives replies without code, and reports a passing
// evaluation as its best.
func RunStrategyConformance(t *testing.T, impl sdk.Strategy, config json.RawMessage) {
	r := Connect(t, impl)
	checkBase(t, r, sdk.KindStrategy, config)
	s := r.Strategy()
	ctx := context.Background()
	pass := func(src string) bool { return strings.Contains(src, "# good") }
	for _, budget := range []sdk.Budget{{Generations: 1, Evaluations: 1}, {Generations: 3, Evaluations: 3}} {
		t.Run("budget", func(t *testing.T) {
			fp := &FakePlatform{Replies: []string{GoodReply}, Pass: pass, Budget: budget}
			res, err := s.Run(ctx, sdk.RunRequest{Task: SampleTask, Budget: budget, Seed: 1}, fp)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if fp.Generations > budget.Generations || fp.Evaluations > budget.Evaluations {
				t.Errorf("used %d generations and %d evaluations of a %+v budget", fp.Generations, fp.Evaluations, budget)
			}
			if fp.Evaluations == 0 {
				t.Error("no evaluation with a budget that allows one")
			}
			evals := 0
			for _, a := range fp.Attempts {
				if a.EvaluationID != "" {
					evals++
				}
			}
			if evals != fp.Evaluations {
				t.Errorf("%d evaluations but %d recorded attempts with an evaluation", fp.Evaluations, evals)
			}
			if res.BestEvaluation == "" {
				t.Error("a passing evaluation was not reported as best")
			}
			if res.Attempts != len(fp.Attempts) {
				t.Errorf("RunResult.Attempts = %d, recorded %d", res.Attempts, len(fp.Attempts))
			}
		})
	}
	t.Run("reply without code", func(t *testing.T) {
		fp := &FakePlatform{Replies: []string{BadReply}, Pass: pass, Budget: sdk.Budget{Generations: 2, Evaluations: 2}}
		res, err := s.Run(ctx, sdk.RunRequest{Task: SampleTask, Budget: fp.Budget, Seed: 1}, fp)
		if err != nil {
			t.Fatalf("Run with replies without code must finish, got %v", err)
		}
		if fp.Evaluations != 0 {
			t.Errorf("evaluated %d times without any code", fp.Evaluations)
		}
		if len(fp.Attempts) == 0 || res.BestEvaluation != "" {
			t.Errorf("attempts %d, best %q", len(fp.Attempts), res.BestEvaluation)
		}
	})
}

// TargetCase is what a target suite evaluates: a device and kernels for SampleTask.
type TargetCase struct {
	Device string
	Honest string // a ModelNew that passes
	Wrong  string // a ModelNew that fails with output_mismatch
	Config sdk.Config
}

// DefaultTargetCase uses plain PyTorch candidates on the CPU.
func DefaultTargetCase() TargetCase {
	c := sdk.DefaultConfig()
	c.Seeds, c.TimedCalls, c.Warmup, c.CheckCalls = 1, 10, 1, 2
	return TargetCase{Device: "cpu", Config: c,
		Honest: "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.clamp_min(x, 0)\n",
		Wrong:  "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.abs(x)\n"}
}

// RunTargetConformance checks a target: it describes its devices, passes an honest kernel with
// timings, fails a wrong one with details, reports progress, and validates the task.
func RunTargetConformance(t *testing.T, impl sdk.Target, config json.RawMessage, tc TargetCase) {
	r := Connect(t, impl)
	checkBase(t, r, sdk.KindTarget, config)
	tg := r.Target()
	ctx := context.Background()
	hw, err := tg.Describe(ctx)
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	found := false
	for _, d := range hw.Devices {
		if d.Name == tc.Device {
			found = true
		}
	}
	if !found {
		t.Fatalf("Describe lists %v, not %s", hw.Devices, tc.Device)
	}
	eval := func(src string) (*sdk.Result, int) {
		var progress int
		var mu sync.Mutex
		k := sdk.Kernel{Hash: hashOf(src), Source: src, Name: "conformance"}
		res, err := tg.Evaluate(ctx, sdk.EvaluateRequest{Task: SampleTask, Kernel: k, Device: tc.Device, Config: tc.Config}, func(string) {
			mu.Lock()
			progress++
			mu.Unlock()
		})
		if err != nil {
			t.Fatalf("Evaluate: %v", err)
		}
		return res, progress
	}
	t.Run("honest kernel passes", func(t *testing.T) {
		res, progress := eval(tc.Honest)
		if res.Verdict != sdk.Pass {
			t.Fatalf("verdict %s %s: %s", res.Verdict, res.ErrorClass, res.Message)
		}
		if res.Timing == nil || res.Timing.Candidate.N == 0 || res.Timing.Reference.N == 0 || res.Timing.Speedup <= 0 {
			t.Errorf("timing missing: %+v", res.Timing)
		}
		if len(res.Fingerprint) == 0 {
			t.Error("no fingerprint")
		}
		if progress == 0 {
			t.Error("no progress reported")
		}
	})
	t.Run("wrong kernel fails with details", func(t *testing.T) {
		res, _ := eval(tc.Wrong)
		if res.Verdict != sdk.Fail || res.ErrorClass != sdk.ClassMismatch || res.Mismatch == nil || res.Mismatch.Message == "" {
			t.Fatalf("got %s %s mismatch=%v", res.Verdict, res.ErrorClass, res.Mismatch)
		}
	})
	t.Run("broken file is a load error", func(t *testing.T) {
		res, _ := eval("this is not python\n")
		if res.Verdict != sdk.Fail || res.ErrorClass != sdk.ClassLoad {
			t.Fatalf("got %s %s: %s", res.Verdict, res.ErrorClass, res.Message)
		}
	})
	t.Run("validate", func(t *testing.T) {
		v, err := tg.Validate(ctx, SampleTask, tc.Device, tc.Config)
		if err != nil || !v.OK {
			t.Fatalf("Validate: %v %+v", err, v)
		}
	})
	t.Run("unknown device", func(t *testing.T) {
		_, err := tg.Evaluate(ctx, sdk.EvaluateRequest{Task: SampleTask, Kernel: sdk.Kernel{Source: tc.Honest}, Device: "quantum:7", Config: tc.Config}, nil)
		if !errors.Is(err, sdk.ErrInvalidArgument) {
			t.Errorf("unknown device: got %v, want sdk.ErrInvalidArgument", err)
		}
	})
}
