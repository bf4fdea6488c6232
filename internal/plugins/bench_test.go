package plugins

import (
	"context"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
)

// echoTarget answers Evaluate at once with a result the size of a real one (100 timing samples
// per side, ten trials, a fingerprint), so a benchmark measures the plugin boundary alone.
type echoTarget struct{ spawner }

func (e *echoTarget) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindTarget, Name: "echo-target", Version: "1.0.0"}
}

func (e *echoTarget) Evaluate(_ context.Context, req sdk.EvaluateRequest, p sdk.Progress) (*sdk.Result, error) {
	p("correctness trial 1/10")
	samples := make([]float64, 100)
	for i := range samples {
		samples[i] = 1 + float64(i)/1000
	}
	res := &sdk.Result{Contract: "kbp-contract/1", Task: req.Task, Kernel: req.Kernel, Device: req.Device, Verdict: sdk.Pass,
		Timing:      &sdk.Timing{Candidate: sdk.Summarize(samples), Reference: sdk.Summarize(samples), Samples: samples, RefSamples: samples, Speedup: 1},
		Fingerprint: sdk.Fingerprint{"device_name": "NVIDIA H200", "torch": "2.11.0", "driver": "580.159.04", "cpu_model": "AMD EPYC"},
		Config:      req.Config, StartedAt: time.Now(), FinishedAt: time.Now()}
	for i := 0; i < 10; i++ {
		res.Trials = append(res.Trials, sdk.Trial{Seed: i, Dist: "default", OK: true})
	}
	return res, nil
}

// BenchmarkEvaluateRoundTrip is one Evaluate call through a real plugin process (gRPC over the
// go-plugin connection, with mTLS), a streamed progress event and the result.
func BenchmarkEvaluateRoundTrip(b *testing.B) {
	dir := b.TempDir()
	install(b, dir, "target", "echo-target", "echo-target")
	m := New(Options{Dirs: []string{dir}, LockFile: dir + "/plugins.lock"})
	defer m.Close()
	if _, _, err := m.LockAll(context.Background()); err != nil {
		b.Fatal(err)
	}
	inst, err := m.Start(context.Background(), "target/echo-target", nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	tg := inst.Target()
	src := make([]byte, 8<<10) // an 8 KiB candidate and task, typical sizes
	for i := range src {
		src[i] = 'x'
	}
	req := sdk.EvaluateRequest{Task: sdk.Task{ID: "kbp/l1/relu", Source: string(src)}, Kernel: sdk.Kernel{Source: string(src)}, Device: "cuda:0", Config: sdk.DefaultConfig()}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tg.Evaluate(context.Background(), req, func(string) {}); err != nil {
			b.Fatal(err)
		}
	}
}
