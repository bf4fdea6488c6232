package cluster

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/internal/queue"
	"github.com/kbplatform/kbplatform/sdk"
)

type execFunc func(ctx context.Context, j *queue.Job) *queue.Reply

func (f execFunc) Run(ctx context.Context, j *queue.Job, _ func(string)) *queue.Reply {
	return f(ctx, j)
}

func configured(t *testing.T, url string, kinds ...string) *Target {
	t.Helper()
	raw, _ := json.Marshal(Settings{URL: url, GPUKinds: kinds})
	tg := New()
	if err := tg.Configure(context.Background(), sdk.Configuration{Raw: raw}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	return tg
}

// A study never has more evaluations in flight per kind than workers of the kind; the results
// come back stamped with the kind the study asked for and the worker that judged them.
func TestBackPressureAndStamp(t *testing.T) {
	e, err := queue.StartEmbedded(queue.EmbeddedOptions{StoreDir: filepath.Join(t.TempDir(), "js")})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var running, peak atomic.Int32
	for _, id := range []string{"w1", "w2"} {
		c, err := queue.Dial(ctx, e.URL(), id, queue.Auth{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go c.Serve(ctx, queue.WorkerOptions{Info: queue.WorkerInfo{ID: id, Kind: "h200", Device: "cuda:0", Model: "NVIDIA H200"}},
			execFunc(func(ctx context.Context, j *queue.Job) *queue.Reply {
				n := running.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(150 * time.Millisecond)
				running.Add(-1)
				return &queue.Reply{Result: &sdk.Result{Verdict: sdk.Pass, Device: "cuda:0", Task: j.Evaluate.Task,
					Fingerprint: sdk.Fingerprint{"gpu_name": "NVIDIA H200"}}}
			}))
	}
	tg := configured(t, e.URL(), "h200", "l40s")
	deadline := time.Now().Add(10 * time.Second)
	for tg.slots.capacity(ctx, "h200") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the two workers never showed up")
		}
		time.Sleep(100 * time.Millisecond)
	}
	hw, err := tg.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range hw.Devices {
		names = append(names, d.Name)
	}
	if !slices.Equal(names, []string{"cuda:h200", "cuda:l40s"}) || hw.Devices[0].Model != "NVIDIA H200" {
		t.Errorf("devices %+v", hw.Devices)
	}
	if !slices.Contains(hw.Capabilities, "kind:h200 workers=2 queued=0 running=0 done=0") {
		t.Errorf("capabilities %v", hw.Capabilities)
	}
	var wg sync.WaitGroup
	var maxInFlight atomic.Int32
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				if n := int32(tg.slots.inFlight("h200")); n > maxInFlight.Load() {
					maxInFlight.Store(n)
				}
			}
		}
	}()
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := tg.Evaluate(ctx, sdk.EvaluateRequest{Task: sdk.Task{ID: "kbp/l1/relu", Source: "src"}, Kernel: sdk.Kernel{Hash: "h"}, Device: "cuda:h200"}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			if res.Device != "cuda:h200" || res.Fingerprint["cluster_device"] != "cuda:0" || res.Fingerprint["cluster_worker"] == "" {
				t.Errorf("result not stamped: device %s, fingerprint %v", res.Device, res.Fingerprint)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if m := maxInFlight.Load(); m > 2 {
		t.Errorf("%d evaluations in flight with 2 workers", m)
	}
	if p := peak.Load(); p != 2 {
		t.Errorf("peak concurrency on the workers %d, want 2", p)
	}
	st, err := tg.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Kinds[0].Done != 6 {
		t.Errorf("done %d, want 6", st.Kinds[0].Done)
	}
	if _, err := tg.Evaluate(ctx, sdk.EvaluateRequest{Device: "cuda"}, nil); err == nil {
		t.Error("a device without a kind was accepted")
	}
}

// Compiles go to the compile lanes of the kind's workers, beside (not behind) an evaluation.
func TestCompileLane(t *testing.T) {
	e, err := queue.StartEmbedded(queue.EmbeddedOptions{StoreDir: filepath.Join(t.TempDir(), "js")})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := queue.Dial(ctx, e.URL(), "w", queue.Auth{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	release := make(chan struct{})
	go c.Serve(ctx, queue.WorkerOptions{Info: queue.WorkerInfo{ID: "w", Kind: "l40s", Device: "cuda:0"}, CompileWorkers: 1},
		execFunc(func(ctx context.Context, j *queue.Job) *queue.Reply {
			if j.Op == queue.OpCompile {
				if j.Compile.Kernel.Source != "kernel src" || j.Compile.Task.Source != "task src" {
					return &queue.Reply{Error: "sources lost on the way"}
				}
				return &queue.Reply{Compile: &sdk.CompileResult{OK: true, Builds: 1}}
			}
			<-release // an evaluation holds the device
			return &queue.Reply{Result: &sdk.Result{Verdict: sdk.Pass}}
		}))
	tg := configured(t, e.URL())
	evalDone := make(chan error, 1)
	go func() {
		_, err := tg.Evaluate(ctx, sdk.EvaluateRequest{Task: sdk.Task{ID: "a"}, Device: "cuda:l40s"}, nil)
		evalDone <- err
	}()
	cr, err := tg.Compile(ctx, sdk.CompileRequest{Task: sdk.Task{ID: "b", Source: "task src"}, Kernel: sdk.Kernel{Hash: "k", Source: "kernel src"}, Device: "cuda:l40s"})
	if err != nil {
		t.Fatal(err)
	}
	if !cr.OK || cr.Builds != 1 {
		t.Errorf("compile result %+v", cr)
	}
	close(release)
	if err := <-evalDone; err != nil {
		t.Fatal(err)
	}
}
