package contract

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/internal/gpulock"
	"github.com/kbplatform/kbplatform/sdk"
)

// timedSpan is when an evaluation's timing phase ran: from the moment the timing said it starts
// to that plus the phase's own measured length (Phases.Timing), both taken inside timing(), so
// the span is not the lock's but the timed calls' own.
type timedSpan struct{ from, to time.Time }

// spanEvaluator is an evaluator of its own (its own reference processes, device slot and lock
// handles, as a second kbplatform command has) whose progress marks when its timing starts.
func spanEvaluator(t *testing.T, cfg Config, said *[]string, mu *sync.Mutex, timingAt *time.Time) *Evaluator {
	t.Helper()
	e, err := New(Options{Python: testPython(t), WorkDir: t.TempDir(), CacheDir: sharedCache, Config: cfg, Progress: func(m string) {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(m, "timing reference and candidate") {
			*timingAt = time.Now()
		}
		*said = append(*said, m)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func cpuTurnConfig() Config {
	cfg := Defaults()
	cfg.TimedCalls, cfg.Warmup, cfg.Seeds, cfg.CheckCalls = 300, 5, 2, 2
	cfg.Timeout, cfg.CallTimeout = 5*time.Minute, time.Minute
	return cfg
}

// Two evaluators that share nothing (two kbplatform commands on one host), started together on
// the same CPU task, time their kernels one after the other: their timing phases do not overlap,
// and the one that waited said for which CPU and whom. Without the turn both reach their timed
// calls within a second of each other and time side by side for seconds.
func TestCPUTimingTakesTurns(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // the lock files of this test alone
	cfg := cpuTurnConfig()
	var mu sync.Mutex
	said := make([][]string, 2)
	at := make([]time.Time, 2)
	evs := []*Evaluator{spanEvaluator(t, cfg, &said[0], &mu, &at[0]), spanEvaluator(t, cfg, &said[1], &mu, &at[1])}
	task, kernel := loadTask(t, "scale_relu"), loadKernel(t, "honest_torch")
	res := make([]*Result, 2)
	var wg sync.WaitGroup
	for i, e := range evs {
		wg.Go(func() { res[i] = e.Evaluate(context.Background(), task, kernel, "cpu", nil) })
	}
	wg.Wait()
	var spans []timedSpan
	for i, r := range res {
		if r.Verdict != Pass || r.Timing == nil {
			t.Fatalf("evaluation %d: %s %s %s", i, r.Verdict, r.ErrorClass, r.Message)
		}
		if r.HasFlag(sdk.FlagCPUShared) {
			t.Fatalf("evaluation %d took its turn, yet is flagged: %s", i, r.FlagReason(sdk.FlagCPUShared))
		}
		spans = append(spans, timedSpan{at[i], at[i].Add(time.Duration(r.Phases.Timing * float64(time.Second)))})
	}
	a, b := spans[0], spans[1]
	t.Logf("timing phases: %s .. %s and %s .. %s", a.from.Format("15:04:05.000"), a.to.Format("15:04:05.000"), b.from.Format("15:04:05.000"), b.to.Format("15:04:05.000"))
	if a.from.Before(b.to) && b.from.Before(a.to) {
		t.Fatalf("the two evaluations' timing phases overlapped: %s .. %s and %s .. %s", a.from, a.to, b.from, b.to)
	}
	waited := strings.Join(append(said[0], said[1]...), "\n")
	if !strings.Contains(waited, "cpu: waiting for CPU ") || !strings.Contains(waited, "another kbplatform process is timing (pid ") {
		t.Fatalf("neither evaluator said it waited for the CPUs:\n%s", waited)
	}
}

// A wait for the CPUs is not the kernel's time: an evaluation whose time limit is shorter than
// the wait, held up by another holder of its CPUs, passes once they are given back. When the
// CPUs cannot be locked at all (no folder for the lock files), the timing runs anyway and is
// flagged cpu_shared, saying why.
func TestCPUTurnWaitAndShared(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	cfg := cpuTurnConfig()
	cfg.TimedCalls = 20
	cfg.Timeout = 20 * time.Second
	task, kernel := loadTask(t, "scale_relu"), loadKernel(t, "honest_torch")
	cpus, err := gpulock.CPUs()
	if err != nil {
		t.Fatal(err)
	}
	held, err := gpulock.LockCPUs(context.Background(), gpulock.Eval, cpus, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var said []string
	var at time.Time
	e := spanEvaluator(t, cfg, &said, &mu, &at)
	go func() {
		for { // give the CPUs back a time limit after the evaluation started waiting for them
			mu.Lock()
			waiting := strings.Contains(strings.Join(said, "\n"), "cpu: waiting for CPU")
			mu.Unlock()
			if waiting {
				time.Sleep(cfg.Timeout + 2*time.Second)
				held.Release()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	res := e.Evaluate(context.Background(), task, kernel, "cpu", nil)
	if res.Verdict != Pass || res.HasFlag(sdk.FlagCPUShared) {
		t.Fatalf("an evaluation that waited %v for its CPUs under a %v limit: %s %s %s %v", cfg.Timeout+2*time.Second, cfg.Timeout, res.Verdict, res.ErrorClass, res.Message, res.Flags)
	}
	if res.Phases.Total < cfg.Timeout.Seconds() {
		t.Fatalf("the evaluation ran %.1fs: it did not wait for the CPUs", res.Phases.Total)
	}

	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	res = e.Evaluate(context.Background(), task, kernel, "cpu", nil)
	if res.Verdict != Pass || res.Timing == nil {
		t.Fatalf("without lock files: %s %s %s", res.Verdict, res.ErrorClass, res.Message)
	}
	if why := res.FlagReason(sdk.FlagCPUShared); !strings.Contains(why, "could not take their turn at this host's CPUs") || !strings.Contains(why, "missing") {
		t.Fatalf("without lock files the timing is flagged %v", res.Flags)
	}
}
