// Package reporttest writes small, hand-checkable studies straight into a store, for the tests of
// reports, plots and exports (running real studies is slow and their timings are not stable).
package reporttest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

// Hardware fingerprints of the two sides of a portability comparison.
var (
	CPUA = sdk.Fingerprint{"device_name": "cpu", "cpu_model": "Test CPU A", "torch": "2.11.0"}
	GPUB = sdk.Fingerprint{"device_name": "cuda", "gpu_name": "Test GPU B", "torch": "2.11.0", "driver": "580.1"}
)

// Kernel hashes the studies share: the same kernels judged on two machines.
const (
	ReluFast    = "a1a1a1a1a1a10000000000000000000000000000000000000000000000000000"
	ReluWrong   = "a2a2a2a2a2a20000000000000000000000000000000000000000000000000000"
	SoftmaxDel  = "b1b1b1b1b1b10000000000000000000000000000000000000000000000000000"
	SoftmaxFast = "b2b2b2b2b2b20000000000000000000000000000000000000000000000000000"
	GemmBroken  = "c1c1c1c1c1c10000000000000000000000000000000000000000000000000000"
	ConvFast    = "d1d1d1d1d1d10000000000000000000000000000000000000000000000000000"
	MLPKernel   = "e1e1e1e1e1e10000000000000000000000000000000000000000000000000000"
)

// Open opens a fresh store in a temporary folder.
func Open(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Outcome is one evaluated kernel of a fixture.
type Outcome struct {
	Task    string
	Level   int
	Kernel  string
	Verdict string
	Class   string
	Speedup float64 // eager median / candidate median
	Flags   []string
	Blame   string
	Turn    int
	Sample  int
	// NoAttempt stores the evaluation without an attempt naming it (stores older than attempts).
	NoAttempt bool
	// Generation is an attempt whose model call failed: no kernel, no evaluation.
	Generation string
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// Put stores a study of one model (replay + cpp + oneshot @ local) with the outcomes, on the
// given hardware. With armed, attempts name their arm (as the studies branch records them);
// without, reports must fall back to the spec.
func Put(t testing.TB, st *store.Store, id, name string, fp sdk.Fingerprint, armed bool, outs []Outcome) {
	t.Helper()
	spec := map[string]any{
		"name": name, "tasks": tasksOf(outs), "size": "cpu", "device": "cpu",
		"model":    map[string]any{"ref": "model/replay"},
		"backend":  map[string]any{"ref": "backend/cpp"},
		"strategy": map[string]any{"ref": "strategy/oneshot"},
		"target":   map[string]any{"ref": "target/local"},
		"seed":     0,
	}
	raw, _ := json.Marshal(spec)
	if err := st.PutStudy(store.Study{ID: id, Name: name, Spec: raw, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	clock := t0
	for i, o := range outs {
		clock = clock.Add(time.Minute)
		a := &store.AttemptRecord{ID: store.NewID(clock), Study: id, Task: o.Task, Model: "replay", At: clock,
			Attempt: sdk.Attempt{Step: i, ParentStep: -1, Turn: o.Turn, Sample: o.Sample}}
		if armed {
			a.Arm, a.Backend, a.Strategy, a.Target = "replay|cpp|oneshot|local|0", "cpp", "oneshot", "local"
		}
		if o.Generation != "" {
			a.Failure = o.Generation
			put(t, st, a)
			continue
		}
		res := &sdk.Result{Contract: "kbp-contract/1", Task: sdk.Task{ID: o.Task, Size: "cpu", Level: o.Level},
			Kernel: sdk.Kernel{Hash: o.Kernel}, Device: "cpu", Verdict: o.Verdict, ErrorClass: o.Class, Fingerprint: fp,
			StartedAt: clock, FinishedAt: clock}
		if o.Class != "" {
			res.Message = o.Class + " happened\nmore detail"
		}
		for _, f := range o.Flags {
			res.Flags = append(res.Flags, sdk.Flag{Name: f, Reason: "test"})
		}
		if o.Verdict == sdk.Pass {
			res.Timing = &sdk.Timing{Candidate: sdk.Stats{N: 10, Median: 1 / o.Speedup}, Reference: sdk.Stats{N: 10, Median: 1}, Speedup: o.Speedup}
		}
		ev := &store.Evaluation{ID: store.NewID(clock), Target: "local/" + fp["device_name"].(string), StoredAt: clock, Result: res,
			Study: id, Model: "replay", Blame: o.Blame}
		if err := st.PutEvaluation(ev); err != nil {
			t.Fatal(err)
		}
		if o.NoAttempt {
			continue
		}
		a.EvaluationID, a.KernelHash = ev.ID, o.Kernel
		put(t, st, a)
	}
}

func put(t testing.TB, st *store.Store, a *store.AttemptRecord) {
	t.Helper()
	if err := st.PutAttempt(a); err != nil {
		t.Fatal(err)
	}
}

func tasksOf(outs []Outcome) []string {
	var out []string
	seen := map[string]bool{}
	for _, o := range outs {
		if !seen[o.Task] {
			seen[o.Task] = true
			out = append(out, o.Task)
		}
	}
	return out
}

// StudyA is the reference study, on CPUA, recorded without arms (an older store):
//
//	relu     L1: pass 1.6x (turn 0), then a mismatch                  → correct, 1.6x
//	softmax  L1: pass 0.7x flagged torch_delegation, turn 1 pass 1.25x → correct, 1.25x
//	gemm     L2: compile error, then a generation failure             → incorrect
//	conv     L2: pass 3.0x, evaluation without attempt                → correct, 3.0x
//	mlp      L3: platform error only                                  → no verdict, left out
//
// fast_0 = 3/4, fast_1 = 3/4, fast_1.5 = 2/4, fast_2 = 1/4, geomean = (1.6·1.25·3)^(1/3).
func StudyA() []Outcome {
	return []Outcome{
		{Task: "kbp/l1/relu", Level: 1, Kernel: ReluFast, Verdict: sdk.Pass, Speedup: 1.6},
		{Task: "kbp/l1/relu", Level: 1, Kernel: ReluWrong, Verdict: sdk.Fail, Class: sdk.ClassMismatch, Sample: 1},
		{Task: "kbp/l1/softmax", Level: 1, Kernel: SoftmaxDel, Verdict: sdk.Pass, Speedup: 0.7, Flags: []string{sdk.FlagTorchDelegation}},
		{Task: "kbp/l1/softmax", Level: 1, Kernel: SoftmaxFast, Verdict: sdk.Pass, Speedup: 1.25, Turn: 1},
		{Task: "kbp/l2/gemm_relu", Level: 2, Kernel: GemmBroken, Verdict: sdk.Fail, Class: sdk.ClassCompile},
		{Task: "kbp/l2/gemm_relu", Generation: "empty_reply", Sample: 1},
		{Task: "kbp/l2/conv", Level: 2, Kernel: ConvFast, Verdict: sdk.Pass, Speedup: 3.0, NoAttempt: true},
		{Task: "kbp/l3/mlp", Level: 3, Kernel: MLPKernel, Verdict: sdk.VerdictError, Class: sdk.ClassPlatform, Blame: "platform"},
	}
}

// StudyB is StudyA's kernels re-judged on GPUB (attempts name their arm): relu's kernel is slower
// than eager there (a flip), softmax's fast kernel gets faster, conv's fails.
func StudyB() []Outcome {
	return []Outcome{
		{Task: "kbp/l1/relu", Level: 1, Kernel: ReluFast, Verdict: sdk.Pass, Speedup: 0.9},
		{Task: "kbp/l1/relu", Level: 1, Kernel: ReluWrong, Verdict: sdk.Fail, Class: sdk.ClassMismatch, Sample: 1},
		{Task: "kbp/l1/softmax", Level: 1, Kernel: SoftmaxDel, Verdict: sdk.Pass, Speedup: 1.1, Flags: []string{sdk.FlagTorchDelegation}},
		{Task: "kbp/l1/softmax", Level: 1, Kernel: SoftmaxFast, Verdict: sdk.Pass, Speedup: 2.5, Sample: 1},
		{Task: "kbp/l2/gemm_relu", Level: 2, Kernel: GemmBroken, Verdict: sdk.Fail, Class: sdk.ClassCompile},
		{Task: "kbp/l2/conv", Level: 2, Kernel: ConvFast, Verdict: sdk.Fail, Class: sdk.ClassRuntime},
		{Task: "kbp/l3/mlp", Level: 3, Kernel: MLPKernel, Verdict: sdk.Pass, Speedup: 1.05},
	}
}

// PutCompileBaseline stores a torch.compile baseline of a task on the hardware, median ms per call.
func PutCompileBaseline(t testing.TB, st *store.Store, task, mode string, fp sdk.Fingerprint, median float64) {
	t.Helper()
	b := store.Baseline{TaskID: task, Size: "cpu", Mode: mode, Device: "cpu", Platform: fp.Key(), Fingerprint: fp,
		Stats: &sdk.Stats{N: 10, Median: median}, Verdict: sdk.Pass, MeasuredAt: t0}
	if err := st.PutBaseline(b); err != nil {
		t.Fatal(err)
	}
}
