package study

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/internal/gateway"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

// fakeTarget counts how many evaluations and builds run at once.
type fakeTarget struct {
	sdk.NoConfig
	evaluating, maxEvaluating atomic.Int32
	compiles, withCompiled    atomic.Int32

	mu       sync.Mutex
	onDevice map[string]int // evaluations running on each device now
	overlap  []string       // devices seen running two at once
	ran      map[string]int // evaluations per device
}

func (f *fakeTarget) Info() sdk.Info { return sdk.Info{Kind: sdk.KindTarget, Name: "fake"} }
func (f *fakeTarget) Describe(context.Context) (*sdk.Hardware, error) {
	return &sdk.Hardware{}, nil
}
func (f *fakeTarget) Compile(context.Context, sdk.CompileRequest) (*sdk.CompileResult, error) {
	f.compiles.Add(1)
	time.Sleep(5 * time.Millisecond)
	return &sdk.CompileResult{}, nil
}
func (f *fakeTarget) Evaluate(_ context.Context, req sdk.EvaluateRequest, _ sdk.Progress) (*sdk.Result, error) {
	n := f.evaluating.Add(1)
	defer f.evaluating.Add(-1)
	for {
		m := f.maxEvaluating.Load()
		if n <= m || f.maxEvaluating.CompareAndSwap(m, n) {
			break
		}
	}
	if req.Compiled != nil {
		f.withCompiled.Add(1)
	}
	f.mu.Lock()
	if f.onDevice == nil {
		f.onDevice, f.ran = map[string]int{}, map[string]int{}
	}
	f.onDevice[req.Device]++
	f.ran[req.Device]++
	if f.onDevice[req.Device] > 1 {
		f.overlap = append(f.overlap, req.Device)
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.onDevice[req.Device]--
		f.mu.Unlock()
	}()
	time.Sleep(10 * time.Millisecond)
	return &sdk.Result{Task: req.Task, Kernel: req.Kernel, Device: req.Device, Verdict: sdk.Pass,
		Timing: &sdk.Timing{Speedup: 1.5}}, nil
}
func (f *fakeTarget) Baseline(context.Context, sdk.BaselineRequest, sdk.Progress) (*sdk.Result, error) {
	return nil, sdk.ErrUnsupported
}
func (f *fakeTarget) Validate(context.Context, sdk.Task, string, sdk.Config) (*sdk.Validation, error) {
	return nil, sdk.ErrUnsupported
}

type fakeBackend struct{ sdk.NoConfig }

func (fakeBackend) Info() sdk.Info { return sdk.Info{Kind: sdk.KindBackend, Name: "fake"} }
func (fakeBackend) Prompt(context.Context, sdk.PromptRequest) ([]sdk.Message, error) {
	return []sdk.Message{{Role: "user", Content: "write it"}}, nil
}
func (fakeBackend) Extract(_ context.Context, text string) (string, error) { return text, nil }
func (fakeBackend) Check(context.Context, string, sdk.Task) ([]sdk.Issue, error) {
	return nil, nil
}
func (fakeBackend) Recipe(context.Context, *sdk.Hardware) (*sdk.BuildRecipe, error) {
	return &sdk.BuildRecipe{}, nil
}

// fakeModel answers every request with 60 prompt and 40 completion tokens.
type fakeModel struct{ sdk.NoConfig }

func (fakeModel) Info() sdk.Info { return sdk.Info{Kind: sdk.KindModel, Name: "fake"} }
func (fakeModel) Generate(_ context.Context, req sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	return &sdk.GenerateResponse{Completions: []sdk.Completion{{Text: "kernel"}}, Usage: sdk.Usage{PromptTokens: 60, CompletionTokens: 40}}, nil
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func testPlatform(st *store.Store, tg sdk.Target, ln *lane, b sdk.Budget, device string) *runPlatform {
	arm := Arm{Model: PluginRef{Ref: "model/fake"}, Backend: PluginRef{Ref: "backend/cpp"}, Strategy: PluginRef{Ref: "strategy/refine", Name: "refine-GE"},
		Target: PluginRef{Ref: "target/local"}, Seed: 7}
	spec := Spec{Tasks: []string{"kbp/l1/relu"}, Device: device, Strategies: []PluginRef{arm.Strategy}, Budget: b}
	gw := gateway.New(fakeModel{}, gateway.Options{Name: "fake", Plugin: "model/fake", Store: st,
		Prices: gateway.Prices{"fake": {Input: 1e4, Output: 1e4}}}, nil) // $0.01 a token
	return &runPlatform{hostPlatform: &hostPlatform{store: st}, study: "0123456789abcdef0123", task: sdk.Task{ID: "kbp/l1/relu", Size: "cpu"},
		spec: spec, arm: arm, armKey: arm.Key(), model: gw, backend: fakeBackend{}, target: tg, lane: ln,
		meter: newMeter(b, nil), progress: func(string) {}}
}

// Units that share a device evaluate on it one at a time; on a GPU their kernels are built ahead,
// outside the device's turn, and the build reaches the evaluation.
func TestOneEvaluationPerDevice(t *testing.T) {
	for _, device := range []string{"cpu", "cuda:0"} {
		t.Run(device, func(t *testing.T) {
			st := openStore(t)
			tg := &fakeTarget{}
			ln, err := newLane([]string{device}, nil, device != "cpu", 4)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for i := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := testPlatform(st, tg, ln, sdk.Budget{}, device)
					if _, err := p.Evaluate(context.Background(), fmt.Sprintf("kernel %d", i), ""); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if m := tg.maxEvaluating.Load(); m != 1 {
				t.Errorf("%d evaluations at once on one device", m)
			}
			wantCompiled := int32(0)
			if device != "cpu" {
				wantCompiled = 6
			}
			if tg.compiles.Load() != wantCompiled || tg.withCompiled.Load() != wantCompiled {
				t.Errorf("built ahead %d, evaluated with the build %d; want %d", tg.compiles.Load(), tg.withCompiled.Load(), wantCompiled)
			}
		})
	}
}

func cpuLane(t *testing.T) *lane {
	t.Helper()
	ln, err := newLane([]string{"cpu"}, nil, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// Units on a host of several GPUs: every GPU is used, none runs two evaluations at once, each
// record names the GPU it ran on, and a unit's evaluations stay on the GPU holding its task.
func TestEvaluationsSpreadOverDevices(t *testing.T) {
	st := openStore(t)
	tg := &fakeTarget{}
	devices := []string{"cuda:0", "cuda:1", "cuda:2"}
	models := map[string]string{"cuda:0": "H200/9.0", "cuda:1": "H200/9.0", "cuda:2": "H200/9.0"}
	ln, err := newLane(devices, models, true, 2)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	byTask := map[string]map[string]bool{}
	var wg sync.WaitGroup
	for u := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := testPlatform(st, tg, ln, sdk.Budget{}, "cuda:0")
			p.task.ID = fmt.Sprintf("kbp/l1/task%d", u)
			for e := range 4 {
				ev, err := p.Evaluate(context.Background(), fmt.Sprintf("kernel %d of unit %d", e, u), "")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if byTask[p.task.ID] == nil {
					byTask[p.task.ID] = map[string]bool{}
				}
				byTask[p.task.ID][ev.Result.Device] = true
				mu.Unlock()
				stored, err := st.Evaluation(ev.ID)
				if err != nil || stored.Result.Device != ev.Result.Device {
					t.Errorf("stored %v (%v), evaluated on %s", stored, err, ev.Result.Device)
				}
			}
		}()
	}
	wg.Wait()
	if len(tg.overlap) > 0 {
		t.Fatalf("two evaluations at once on %v", tg.overlap)
	}
	if len(tg.ran) != 3 {
		t.Fatalf("evaluations per device %v, want all three used", tg.ran)
	}
	for task, ds := range byTask {
		if len(ds) != 1 {
			t.Errorf("%s ran on %v; three units on three GPUs should each keep one", task, ds)
		}
	}
	if tg.compiles.Load() != 12 || tg.withCompiled.Load() != 12 {
		t.Errorf("built %d, evaluated with the build %d; want 12 each", tg.compiles.Load(), tg.withCompiled.Load())
	}
}

// The host refuses calls past the unit's token or dollar budget, and an attempt is stored with
// its arm and the prompt the host sent.
func TestPlatformBudgetAndAttemptRecord(t *testing.T) {
	st := openStore(t)
	p := testPlatform(st, &fakeTarget{}, cpuLane(t), sdk.Budget{Tokens: 150}, "cpu")
	ctx := context.Background()
	msgs, _ := p.Prompt(ctx, "", "", nil)
	temp := 0.7
	if _, err := p.Generate(ctx, sdk.GenerateRequest{Messages: msgs, Params: sdk.SamplingParams{Temperature: &temp}}); err != nil {
		t.Fatal(err)
	}
	id, err := p.Record(ctx, sdk.Attempt{Step: 0, ParentStep: -1, Completion: "kernel"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Generate(ctx, sdk.GenerateRequest{Messages: msgs}); err != nil {
		t.Fatalf("100 of 150 tokens: %v", err)
	}
	if _, err := p.Generate(ctx, sdk.GenerateRequest{Messages: msgs}); !errors.Is(err, sdk.ErrBudgetExhausted) {
		t.Fatalf("200 of 150 tokens: %v", err)
	}
	if _, err := p.Evaluate(ctx, "kernel", ""); !errors.Is(err, sdk.ErrBudgetExhausted) {
		t.Fatalf("an evaluation past the token budget: %v", err)
	}
	atts, err := st.Attempts(p.study, "kbp/l1/relu")
	if err != nil || len(atts) != 1 || atts[0].ID != id {
		t.Fatalf("attempts %v %v", atts, err)
	}
	a := atts[0]
	if a.Arm != p.armKey || a.Model != "fake" || a.Backend != "cpp" || a.Strategy != "refine-GE" || a.Target != "local" || a.Seed != 7 {
		t.Errorf("attempt's arm: %+v", a)
	}
	if len(a.Prompt) != 1 || a.Prompt[0].Content != "write it" || a.Temperature != 0.7 || len(a.CallIDs) != 1 {
		t.Errorf("attempt's prompt, temperature and calls: %+v", a)
	}

	// Dollars: at $0.01 a token, one reply costs $1.
	p = testPlatform(st, &fakeTarget{}, cpuLane(t), sdk.Budget{CostUSD: 1}, "cpu")
	if _, err := p.Generate(ctx, sdk.GenerateRequest{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Generate(ctx, sdk.GenerateRequest{Messages: msgs}); !errors.Is(err, sdk.ErrBudgetExhausted) {
		t.Fatalf("past $1: %v", err)
	}
}
