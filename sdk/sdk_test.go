package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

// errModel returns whatever error it is told to, wrapped.
type errModel struct {
	sdk.NoConfig
	err error
}

func (m *errModel) Info() sdk.Info { return sdk.Info{Kind: sdk.KindModel, Name: "errs", Version: "1"} }

func (m *errModel) Generate(context.Context, sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	return nil, m.err
}

func TestErrorsKeepTheirIdentityAcrossTheBoundary(t *testing.T) {
	sentinels := []error{sdk.ErrNotFound, sdk.ErrNoCode, sdk.ErrInvalidArgument, sdk.ErrInvalidConfig, sdk.ErrBudgetExhausted,
		sdk.ErrRateLimited, sdk.ErrUnavailable, sdk.ErrUnsupported, sdk.ErrMissingAPIKey, sdk.ErrPermission}
	for _, s := range sentinels {
		t.Run(s.Error(), func(t *testing.T) {
			m := &errModel{err: fmt.Errorf("provider said no: %w", s)}
			r := plugintest.Connect(t, m)
			_, err := r.Model().Generate(context.Background(), sdk.GenerateRequest{N: 1})
			if !errors.Is(err, s) {
				t.Fatalf("got %v, want errors.Is(err, %v)", err, s)
			}
			for _, other := range sentinels {
				if other != s && errors.Is(err, other) {
					t.Errorf("%v also matches %v", err, other)
				}
			}
			if err.Error() != "provider said no: "+s.Error() {
				t.Errorf("message %q lost the plugin's text", err.Error())
			}
		})
	}
	t.Run("plain error", func(t *testing.T) {
		r := plugintest.Connect(t, &errModel{err: errors.New("boom")})
		_, err := r.Model().Generate(context.Background(), sdk.GenerateRequest{N: 1})
		if err == nil || err.Error() != "boom" {
			t.Fatalf("got %v", err)
		}
		for _, s := range sentinels {
			if errors.Is(err, s) {
				t.Errorf("a plain error matches %v", s)
			}
		}
	})
	t.Run("a secret of the plugin's environment stays in the plugin", func(t *testing.T) {
		t.Setenv("KBP_BOUNDARY_TEST_TOKEN", "tok-0123456789abcdef")
		r := plugintest.Connect(t, &errModel{err: fmt.Errorf("%w: HTTP 401: tok-0123456789abcdef or sk-proj-0a1b2c3d4e5f6g", sdk.ErrInvalidAPIKey)})
		_, err := r.Model().Generate(context.Background(), sdk.GenerateRequest{N: 1})
		if !errors.Is(err, sdk.ErrInvalidAPIKey) || err.Error() != "invalid API key: HTTP 401: [redacted] or [redacted]" {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		r := plugintest.Connect(t, &errModel{err: context.DeadlineExceeded})
		_, err := r.Model().Generate(context.Background(), sdk.GenerateRequest{N: 1})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v", err)
		}
	})
}

// echoTarget returns the result it was given, to test the wire conversion.
type echoTarget struct {
	sdk.NoConfig
	res *sdk.Result
}

func (e *echoTarget) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindTarget, Name: "echo", Version: "1"}
}
func (e *echoTarget) Describe(context.Context) (*sdk.Hardware, error) {
	return &sdk.Hardware{Target: "echo", Devices: []sdk.Device{{Name: "cpu", Kind: "cpu"}}}, nil
}
func (e *echoTarget) Compile(context.Context, sdk.CompileRequest) (*sdk.CompileResult, error) {
	return &sdk.CompileResult{OK: true}, nil
}
func (e *echoTarget) Evaluate(_ context.Context, req sdk.EvaluateRequest, p sdk.Progress) (*sdk.Result, error) {
	p("one")
	p("two")
	r := *e.res
	r.Config = req.Config
	return &r, nil
}
func (e *echoTarget) Baseline(context.Context, sdk.BaselineRequest, sdk.Progress) (*sdk.Result, error) {
	return e.res, nil
}
func (e *echoTarget) Validate(context.Context, sdk.Task, string, sdk.Config) (*sdk.Validation, error) {
	return &sdk.Validation{OK: true}, nil
}

func TestResultRoundTrip(t *testing.T) {
	consistent := false
	want := &sdk.Result{
		Contract: "kbp-contract/1",
		Task:     sdk.Task{ID: "kbp/l1/relu", Hash: "th", Size: "cpu", Distributions: []string{"default", "large"}, Tolerance: &sdk.Tolerance{Atol: 1e-3, Rtol: 2e-3}, Strides: "exact", Timeout: time.Minute, Name: "ReLU", Level: 1},
		Kernel:   sdk.Kernel{Hash: "kh", Name: "k.py"},
		Device:   "cuda:0", Verdict: sdk.Fail, ErrorClass: sdk.ClassMismatch, Phase: "correctness", Message: "wrong", Traceback: "tb", Log: "log",
		Tampered: []string{"torch.allclose replaced"}, Warnings: []string{"noisy"},
		Flags:  []sdk.Flag{{Name: sdk.FlagTorchDelegation, Reason: "forward calls torch.relu"}, {Name: sdk.FlagNoCustomKernel, Reason: "no kernel ran"}},
		Trials: []sdk.Trial{{Seed: 7, Dist: "large", OK: false, Kind: "values", Message: "m", Repeated: true, Consistent: &consistent, InputChanged: []int{0, 2}}, {Seed: 8, Dist: "offset", OK: true, Added: "why"}},
		Mismatch: &sdk.Mismatch{Phase: "correctness", Seed: 7, Dist: "large", Call: 3, Kind: "values", Message: "m",
			Detail: map[string]any{"wrong": 3.0, "first_wrong_index": []any{1.0, 2.0}, "pattern": map[string]any{"kind": "rows"}}},
		Timing: &sdk.Timing{Candidate: sdk.Stats{N: 3, Median: 1.5, Mean: 1.6, Min: 1, Max: 2, Q1: 1.2, Q3: 1.8, IQR: 0.6, Std: 0.1, CV: 0.06},
			Reference: sdk.Stats{N: 3, Median: 3}, Speedup: 2, Checked: 2, Samples: []float64{1, 1.5, 2}, RefSamples: []float64{3, 3, 3}, Warmup: 5,
			SpeedupLow: 1.9, SpeedupHigh: 2.1, SpeedupHalves: []float64{1.95, 2.05}},
		Fingerprint: sdk.Fingerprint{"torch": "2.11", "sm_count": 132.0},
		Config:      sdk.DefaultConfig(),
		Compile:     &sdk.CompileResult{OK: true, Builds: 1, CacheHits: 2, Duration: time.Second},
		Phases: &sdk.Phases{WaitDevice: 0.1, Trials: []float64{1, 2}, GPUWork: 0.5, Total: 4,
			ReferenceOps: map[string]sdk.WorkerOp{"load": {Calls: 1, Seconds: 0.25, PeakBytes: 1 << 30, PeakAllocatedBytes: 1 << 29}, "call": {Calls: 12, Seconds: 0.5}},
			CandidateOps: map[string]sdk.WorkerOp{"timed": {Calls: 2, Seconds: 1.5, PeakBytes: 7}}},
		Memory: &sdk.MemoryUse{Footprint: 4, ReferencePeak: 8, CandidatePeak: 6, Peak: 14, DeviceTotal: 100, EvidencePeak: 20, ReferenceAllocated: 7, CandidateAllocated: 5, Harness: 2},
		Profile: &sdk.Profile{Tool: "torch.profiler", TotalUS: 12.5, Kernels: []sdk.KernelTime{
			{Name: "relu_kernel", Calls: 1, TotalUS: 10, Share: 0.8, Custom: true}, {Name: "aten::copy_", Calls: 2, TotalUS: 2.5, Share: 0.2}}},
		Sandbox:   &sdk.Sandbox{Landlock: 7, Network: "denied", Seccomp: true, Env: "allowlist", Scoped: true, Tasks: "cgroup", Missing: []string{"x: why"}},
		StartedAt: time.Unix(1700000000, 0).UTC(), FinishedAt: time.Unix(1700000060, 0).UTC(),
	}
	r := plugintest.Connect(t, &echoTarget{res: want})
	var progress []string
	got, err := r.Target().Evaluate(context.Background(), sdk.EvaluateRequest{Task: want.Task, Kernel: want.Kernel, Config: want.Config},
		func(m string) { progress = append(progress, m) })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip changed the result:\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(progress, []string{"one", "two"}) {
		t.Errorf("progress %v", progress)
	}
}
