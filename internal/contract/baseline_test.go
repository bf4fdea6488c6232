package contract

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBaselines runs the task's own Model through the contract: eager is an A/A measurement that
// builds nothing, and a torch.compile mode either passes with its compile time reported apart or,
// on a torch without torch.compile, is a harness error (no verdict about anything).
func TestBaselines(t *testing.T) {
	py := testPython(t)
	e := newEvaluator(t, func(c *Config) { c.Seeds = 1 })
	task := loadTask(t, "scale_relu")

	eager := e.Baseline(context.Background(), task, "cpu", "eager")
	if eager.Verdict != Pass {
		t.Fatalf("eager baseline: %s %s: %s\n%s", eager.Verdict, eager.ErrorClass, eager.Message, eager.Log)
	}
	if eager.Timing == nil || eager.Timing.Candidate.Median <= 0 || eager.Timing.Reference.Median <= 0 {
		t.Fatalf("eager baseline has no timings: %+v", eager.Timing)
	}
	if eager.Compile == nil || !eager.Compile.OK || eager.Compile.Builds != 0 || eager.Compile.Duration != 0 {
		t.Errorf("eager baseline went through a compile phase: %+v", eager.Compile)
	}
	if eager.ModelCompileS != 0 {
		t.Errorf("eager baseline reports %.2f s of torch.compile", eager.ModelCompileS)
	}
	if len(eager.Tampered) > 0 {
		t.Errorf("the task's own Model was judged tampering: %v", eager.Tampered)
	}

	compiled := e.Baseline(context.Background(), task, "cpu", "compile-default")
	if !py.TorchCompile {
		if compiled.Verdict != VerdictError || compiled.ErrorClass != ClassHarness || !strings.Contains(compiled.Message, "torch.compile") {
			t.Fatalf("compile baseline without torch.compile: %s %s: %s", compiled.Verdict, compiled.ErrorClass, compiled.Message)
		}
		return
	}
	if compiled.Verdict != Pass {
		t.Fatalf("compile-default baseline: %s %s: %s (tampered: %v)\n%s", compiled.Verdict, compiled.ErrorClass, compiled.Message, compiled.Tampered, compiled.Log)
	}
	if compiled.ModelCompileS <= 0 {
		t.Errorf("compile-default baseline reports no compile time")
	}
}

// driftTask's forward takes longer the later it runs (1 ms plus 5 ms for every second since the
// test began, on the host's wall clock, which both processes share): a device whose speed drifts.
const driftTask = `import time
import torch
import torch.nn as nn

T0 = %f


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        time.sleep(0.001 + 0.005 * (time.time() - T0))
        return x * 2


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
`

// An A/A measurement on a drifting device stays near 1.0 because the two sides' timed calls
// alternate. Timed one side after the other, the side timed second would be slower by half the
// drift over the timing phase (the task drifts about 20% over it); the test checks call by call,
// which a loaded host's scheduler does not blur, and that the task drifted enough for sequential
// series to fail it.
func TestAlternationCancelsDrift(t *testing.T) {
	e := newEvaluator(t, func(c *Config) { c.Seeds = 1 })
	src := fmt.Sprintf(driftTask, float64(time.Now().UnixNano())/1e9)
	task := Task{ID: "test/drift", Hash: hashOf(src), Size: "default", Source: src, Distributions: []string{"default", "scaled"}}
	res := e.Baseline(context.Background(), task, "cpu", "eager")
	if res.Verdict != Pass {
		t.Fatalf("drift A/A: %s %s: %s\n%s", res.Verdict, res.ErrorClass, res.Message, res.Log)
	}
	tm := res.Timing
	ratio := tm.Reference.Median / tm.Candidate.Median
	n := min(len(tm.Samples), len(tm.RefSamples))
	if n < 10 {
		t.Fatalf("%d timed calls kept per side, want the series", n)
	}
	// Call i of both sides ran within a call of each other: their ratios are near 1 whatever
	// the drift and however the host's scheduler delayed the series.
	pairs := make([]float64, n)
	for i := range n {
		pairs[i] = tm.RefSamples[i] / tm.Samples[i]
	}
	slices.Sort(pairs)
	pairRatio := (pairs[(n-1)/2] + pairs[n/2]) / 2
	// The drift over the phase: the median of the last quarter of the reference's calls against
	// the first quarter's (medians, so that one call the scheduler delayed does not decide it).
	quarter := func(xs []float64) float64 {
		q := slices.Clone(xs)
		slices.Sort(q)
		return q[len(q)/2]
	}
	drift := (quarter(tm.RefSamples[n-n/4:n]) - quarter(tm.RefSamples[:n/4])) / tm.Reference.Median
	t.Logf("reference %.3f ms, candidate %.3f ms, A/A %.4f, call by call %.4f, drift over the phase %.0f%%",
		tm.Reference.Median, tm.Candidate.Median, ratio, pairRatio, 100*drift)
	// Sequential series would put call i of the second side half a phase after the first's: a
	// call-by-call ratio off by half the drift, beyond the 3% allowed once the drift passes 8%.
	if drift < 0.08 {
		t.Fatalf("the task drifted %.0f%% over the timing phase: too little for sequential series to fail this test", 100*drift)
	}
	if math.Abs(pairRatio-1) > 0.03 {
		t.Fatalf("call-by-call A/A %.4f on a drifting device: the two sides' calls were not timed together", pairRatio)
	}
	// The series' medians move with the scheduler too: beside two busy processes on a 2-core
	// machine they differed by up to 7.6% (55 runs). This bounds what the scheduler may do; the
	// call-by-call ratio above is what tells alternation from sequential series.
	if math.Abs(ratio-1) > 0.1 {
		t.Fatalf("A/A ratio %.4f on a drifting device: the two sides were not timed in the same stretches", ratio)
	}
}

// A candidate whose helper processes load the machine only while the reference is timed gets no
// speedup from it: each side's calls run with the other side's process group stopped.
func TestIdleSideIsStopped(t *testing.T) {
	e := newEvaluator(t, nil)
	res := e.Evaluate(context.Background(), loadTask(t, "matmul_small"), loadKernel(t, "slow_the_reference"), "cpu", nil)
	checkNoHelperSpeedup(t, res)
}

// checkNoHelperSpeedup wants a pass for a candidate that computes the task's own matmul, and no
// speedup worth the name: its helpers must not have slowed the reference.
func checkNoHelperSpeedup(t *testing.T, res *Result) {
	t.Helper()
	if res.Verdict != Pass {
		t.Fatalf("got %s %s: %s\n%s", res.Verdict, res.ErrorClass, res.Message, res.Log)
	}
	tm := res.Timing
	t.Logf("reference %.3f ms, candidate %.3f ms, speedup %.2fx", tm.Reference.Median, tm.Candidate.Median, tm.Speedup)
	if tm.Speedup > 1.5 {
		t.Fatalf("speedup %.2fx for the same matmul: the candidate's helpers slowed the reference", tm.Speedup)
	}
}

// Helpers that leave the candidate's process group and process tree (setsid, then a double fork)
// are stopped with it while the reference is timed, and killed with it when the evaluation ends.
func TestEscapedHelpersAreStoppedAndKilled(t *testing.T) {
	e := newEvaluator(t, nil)
	// The helpers name themselves kbp-escaped: watch for them while the evaluation runs.
	seen := map[int]bool{}
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			for _, pid := range processesNamed("kbp-escaped") {
				seen[pid] = true
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	res := e.Evaluate(context.Background(), loadTask(t, "matmul_small"), loadKernel(t, "escape_the_group"), "cpu", nil)
	close(stop)
	<-watched
	var pids []int
	for pid := range seen {
		pids = append(pids, pid)
	}
	// Whatever the verdict, no helper may outlive the evaluation (kill them here if one did, so
	// the test run is not left loaded).
	var alive []int
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for processAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if processAlive(pid) {
			alive = append(alive, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if len(pids) < 3 || len(alive) > 0 {
		t.Errorf("helpers %v: %v still running after the evaluation", pids, alive)
	}
	checkNoHelperSpeedup(t, res)
}

// processesNamed lists the live processes whose name (comm) is name.
func processesNamed(name string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/comm"); err == nil && strings.TrimSpace(string(b)) == name && processAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}
