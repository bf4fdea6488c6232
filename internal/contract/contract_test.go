package contract

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/internal/pyenv"
	"github.com/kbplatform/kbplatform/sdk"
)

var (
	pyOnce  sync.Once
	pyFound *pyenv.Python
	pyErr   error
)

func testPython(t *testing.T) *pyenv.Python {
	t.Helper()
	pyOnce.Do(func() { pyFound, pyErr = pyenv.Find(context.Background(), os.Getenv("KBP_PYTHON")) })
	if pyErr != nil {
		t.Fatalf("contract tests need python with torch: %v", pyErr)
	}
	return pyFound
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func loadTask(t *testing.T, name string, dists ...string) Task {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "tasks", name+".py"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dists) == 0 {
		dists = []string{"default", "scaled"}
	}
	return Task{ID: "test/" + name, Hash: hashOf(string(b)), Size: "default", Source: string(b), Distributions: dists}
}

func loadKernel(t *testing.T, name string) Kernel {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "kernels", name+".py"))
	if err != nil {
		t.Fatal(err)
	}
	return Kernel{Hash: hashOf(string(b)), Source: string(b), Name: name + ".py"}
}

// sharedCache keeps extension builds across the tests of one run.
var sharedCache = filepath.Join(os.TempDir(), "kbp-contract-test-cache")

func newEvaluator(t *testing.T, mutate func(*Config)) *Evaluator {
	t.Helper()
	cfg := Defaults()
	cfg.TimedCalls = 20
	cfg.Warmup = 2
	cfg.Seeds = 3
	cfg.CheckCalls = 3
	cfg.Timeout = 5 * time.Minute
	cfg.CallTimeout = 60 * time.Second
	if mutate != nil {
		mutate(&cfg)
	}
	e, err := New(Options{Python: testPython(t), WorkDir: t.TempDir(), CacheDir: sharedCache, Config: cfg,
		Progress: func(m string) { t.Log(m) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// TestCheats runs every cheating and broken candidate of testdata/kernels, checks its error
// class, and checks that an honest evaluation right after it still passes.
func TestCheats(t *testing.T) {
	e := newEvaluator(t, func(c *Config) { c.CallTimeout = 20 * time.Second })
	task := loadTask(t, "scale_relu")
	honest := loadKernel(t, "honest_torch")
	cases := []struct {
		kernel string
		task   string
		dists  []string
		class  string
		want   string // substring of the message
	}{
		{"cpp_honest", "", nil, "", ""},
		{"cpp_wrong", "", nil, ClassMismatch, "last"},
		{"cpp_compile_error", "", nil, ClassCompile, "error"},
		{"cpp_segfault", "", nil, ClassCrash, "segmentation fault"},
		{"wrong_tail", "", nil, ClassMismatch, "columns"},
		{"inplace_input", "", nil, ClassInputMutated, "input"},
		{"ptr_cache", "", nil, ClassMismatch, ""},
		{"count_calls", "", nil, ClassMismatch, "timed call"},
		{"patch_allclose", "", nil, ClassTampering, "torch.allclose"},
		{"patch_timer", "", nil, ClassTampering, "perf_counter"},
		{"patch_harness", "", nil, ClassTampering, "_perf_ns"},
		{"fake_prints", "", nil, ClassMismatch, ""},
		{"forge_channel", "", nil, ClassTampering, "reply channel"},
		{"forge_clock", "", nil, ClassTampering, "clock channel"},
		{"os_exit", "", nil, ClassCrash, "status 0"},
		{"sleep_forever", "", nil, ClassTimeout, ""},
		{"segfault", "", nil, ClassCrash, "segmentation fault"},
		{"sigkill_self", "", nil, ClassCrash, "killed by SIGKILL"},
		{"background_thread", "", nil, ClassTampering, "timed call"},
		{"stealth_timer", "", nil, ClassTampering, "timing forged"},
		{"no_modelnew", "", nil, ClassLoad, "ModelNew"},
		{"syntax_error", "", nil, ClassLoad, "SyntaxError"},
		{"runtime_error", "", nil, ClassRuntime, ""},
		{"nondeterministic", "", nil, ClassNondeterm, ""},
		{"wrong_device", "", nil, ClassMismatch, "dtype"},
		// The constant may or may not stand out on the default inputs (seeds are fresh each
		// time); the offset distribution must catch it on every trial, checked below.
		{"tiny_sum_constant", "tiny_sum", []string{"default", "offset"}, ClassMismatch, ""},
		{"tiny_sum_honest", "tiny_sum", []string{"default", "offset"}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.kernel, func(t *testing.T) {
			tk := task
			if c.task != "" {
				tk = loadTask(t, c.task, c.dists...)
			}
			res := e.Evaluate(context.Background(), tk, loadKernel(t, c.kernel), "cpu", nil)
			summary := res.ErrorClass + ": " + res.Message
			if res.Mismatch != nil {
				summary += " [" + res.Mismatch.Dist + "]"
			}
			t.Logf("%s -> %s %s", c.kernel, res.Verdict, summary)
			if res.Timing != nil {
				t.Logf("timing: candidate %+v wall %+v; warnings %q", res.Timing.Candidate, res.Timing.CandidateWall, res.Warnings)
			}
			if c.class == "" {
				if res.Verdict != Pass {
					t.Fatalf("want pass, got %s %s\n%s", res.Verdict, summary, res.Log)
				}
				// 20 timed calls: an interval of the per-call speedups and both halves' medians.
				if tm := res.Timing; tm.SpeedupLow <= 0 || tm.SpeedupLow > tm.SpeedupHigh || len(tm.SpeedupHalves) != 2 ||
					res.HasFlag(sdk.FlagTimingUnresolved) != (unresolved(tm) != "") {
					t.Errorf("speedup %.3f: interval %.3f-%.3f, halves %v, flags %v", tm.Speedup, tm.SpeedupLow, tm.SpeedupHigh, tm.SpeedupHalves, res.Flags)
				}
			} else {
				if res.Verdict != Fail || !slices.Contains(strings.Split(c.class, "|"), res.ErrorClass) {
					t.Fatalf("want fail/%s, got %s/%s: %s\n%s", c.class, res.Verdict, res.ErrorClass, res.Message, res.Log)
				}
				if c.want != "" && !strings.Contains(summary, c.want) {
					t.Errorf("message %q does not mention %q", summary, c.want)
				}
				if slices.Contains(c.dists, "offset") {
					n := 0
					for _, tr := range res.Trials {
						if tr.Dist == "offset" {
							n++
							if tr.OK {
								t.Errorf("an offset trial passed: %+v", tr)
							}
						}
					}
					if n == 0 {
						t.Errorf("no offset trial ran: %+v", res.Trials)
					}
				}
			}
			after := e.Evaluate(context.Background(), task, honest, "cpu", nil)
			if after.Verdict != Pass {
				t.Fatalf("honest evaluation after %s: got %s %s: %s\n%s", c.kernel, after.Verdict, after.ErrorClass, after.Message, after.Log)
			}
		})
	}
}

func TestHonestAndWrong(t *testing.T) {
	e := newEvaluator(t, nil)
	task := loadTask(t, "scale_relu")
	res := e.Evaluate(context.Background(), task, loadKernel(t, "honest_torch"), "cpu", nil)
	if res.Verdict != Pass {
		t.Fatalf("honest: got %s %s: %s\n%s", res.Verdict, res.ErrorClass, res.Message, res.Log)
	}
	t.Logf("honest timing: %+v", res.Timing.Candidate)
	res = e.Evaluate(context.Background(), task, loadKernel(t, "wrong_tail"), "cpu", nil)
	if res.Verdict != Fail || res.ErrorClass != ClassMismatch {
		t.Fatalf("wrong: got %s %s: %s\n%s", res.Verdict, res.ErrorClass, res.Message, res.Log)
	}
	t.Logf("wrong: %s", res.Message)
}

// An evaluation stopped from outside says nothing about the kernel: verdict error, class
// interrupted (the CLI does not store those).
func TestInterruptedIsNotAVerdict(t *testing.T) {
	e := newEvaluator(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(4*time.Second, cancel)
	res := e.Evaluate(ctx, loadTask(t, "scale_relu"), loadKernel(t, "sleep_forever"), "cpu", nil)
	if res.Verdict != VerdictError || res.ErrorClass != ClassInterrupted {
		t.Fatalf("got %s/%s: %s", res.Verdict, res.ErrorClass, res.Message)
	}
	// The evaluator still works afterwards.
	if res := e.Evaluate(context.Background(), loadTask(t, "scale_relu"), loadKernel(t, "honest_torch"), "cpu", nil); res.Verdict != Pass {
		t.Fatalf("after interruption: %s %s %s", res.Verdict, res.ErrorClass, res.Message)
	}
}

// A task whose reference cannot be built gives no verdict about the kernel: error, class
// reference, with the reference's own output in the log. The reference starts while the
// candidate compiles, and a kernel that fails to compile still gets the worker's fingerprint.
func TestReferenceFailureAndCompileFailure(t *testing.T) {
	e := newEvaluator(t, nil)
	res := e.Evaluate(context.Background(), loadTask(t, "broken_init"), loadKernel(t, "honest_torch"), "cpu", nil)
	if res.Verdict != VerdictError || res.ErrorClass != ClassReference || res.Phase != "reference" {
		t.Fatalf("broken task: got %s/%s/%s: %s\n%s", res.Verdict, res.ErrorClass, res.Phase, res.Message, res.Log)
	}
	if !strings.Contains(res.Message+res.Traceback, "cannot be built") || !strings.Contains(res.Log, "== reference process ==") {
		t.Fatalf("broken task: the reference's error is not reported: %q\n%s", res.Message, res.Log)
	}
	if res.Fingerprint["torch"] == nil {
		t.Fatalf("broken task: no worker fingerprint: %v", res.Fingerprint)
	}

	task := loadTask(t, "scale_relu")
	res = e.Evaluate(context.Background(), task, loadKernel(t, "syntax_error"), "cpu", nil)
	if res.Verdict != Fail || res.ErrorClass != ClassLoad || res.Phase != "compile" {
		t.Fatalf("syntax error: got %s/%s/%s: %s", res.Verdict, res.ErrorClass, res.Phase, res.Message)
	}
	if res.Fingerprint["torch"] == nil {
		t.Fatalf("compile failure: no worker fingerprint: %v", res.Fingerprint)
	}
	// The reference started for it is kept and serves the next kernel of the task.
	e.mu.Lock()
	started := e.refs[e.refKey(task, "cpu", "eager")]
	e.mu.Unlock()
	if started == nil {
		t.Fatal("the reference started next to a failed compile was not kept")
	}
	if res := e.Evaluate(context.Background(), task, loadKernel(t, "honest_torch"), "cpu", nil); res.Verdict != Pass {
		t.Fatalf("after both failures: %s %s %s\n%s", res.Verdict, res.ErrorClass, res.Message, res.Log)
	}
	e.mu.Lock()
	reused := e.refs[e.refKey(task, "cpu", "eager")]
	e.mu.Unlock()
	if reused != started {
		t.Fatal("the next evaluation started a new reference instead of using the kept one")
	}
}
