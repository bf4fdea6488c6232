package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kbplatform/kbplatform/internal/metrics"
	"github.com/kbplatform/kbplatform/internal/report/reporttest"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -run %s -update to accept):\n--- got\n%s\n--- want\n%s", name, t.Name(), got, want)
	}
}

func loadA(t *testing.T) *Study {
	st := reporttest.Open(t)
	reporttest.Put(t, st, "studyaaaaaaaaaaaaaaa", "cpu run", reporttest.CPUA, false, reporttest.StudyA())
	reporttest.PutCompileBaseline(t, st, "kbp/l1/relu", "compile-default", reporttest.CPUA, 0.8)
	reporttest.PutCompileBaseline(t, st, "kbp/l1/softmax", "compile-default", reporttest.GPUB, 0.8) // other hardware: ignored
	s, err := Load(st, "studyaaa", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The loader falls back to the spec for attempts without arms, keeps evaluations no attempt
// names, records generation failures, and matches compile baselines by hardware only.
func TestLoad(t *testing.T) {
	s := loadA(t)
	if got, want := len(s.Attempts), 8; got != want {
		t.Fatalf("attempts: got %d, want %d", got, want)
	}
	byTask := map[string][]Attempt{}
	for _, a := range s.Attempts {
		if a.Model != "replay" || a.Backend != "cpp" || a.Strategy != "oneshot" || a.Target != "local" {
			t.Errorf("arm from the spec: got %+v", a.Row)
		}
		byTask[a.Task] = append(byTask[a.Task], a)
	}
	gen := byTask["kbp/l2/gemm_relu"][1]
	if gen.Class != metrics.ClassGeneration || gen.Level != 2 || gen.Evaluation != "" {
		t.Errorf("generation failure: got %+v", gen)
	}
	if conv := byTask["kbp/l2/conv"]; len(conv) != 1 || conv[0].ID != "" || conv[0].Speedup != 3 {
		t.Errorf("evaluation without attempt: got %+v", conv)
	}
	relu := byTask["kbp/l1/relu"][0]
	if v := relu.Versus["compile-default"]; math.Abs(v-0.8*1.6) > 1e-9 {
		t.Errorf("relu vs compile-default: got %v, want %v", v, 0.8*1.6)
	}
	if sm := byTask["kbp/l1/softmax"][1]; len(sm.Versus) != 0 {
		t.Errorf("softmax: a baseline of other hardware must not count: %v", sm.Versus)
	}
	if relu.Hardware != "Test CPU A, torch 2.11.0" {
		t.Errorf("hardware: got %q", relu.Hardware)
	}
	st := reporttest.Open(t)
	if _, err := Load(st, "nope", LoadOptions{}); err == nil {
		t.Error("an unknown study must be an error")
	}
}

// The fixture's numbers, computed by hand (reporttest.StudyA's comment).
func TestBuildNumbers(t *testing.T) {
	s := loadA(t)
	rep := Build(s, Options{})
	if len(rep.Arms) != 1 {
		t.Fatalf("arms: %d", len(rep.Arms))
	}
	a := rep.Arms[0]
	want := map[float64]float64{0: 0.75, 0.5: 0.75, 0.8: 0.75, 1: 0.75, 1.5: 0.5, 2: 0.25, 3: 0, 4: 0}
	for i, p := range rep.P {
		if got := a.FastP[i]; math.Abs(got.Value-want[p]) > 1e-9 || got.N != 4 {
			t.Errorf("fast_%v: got %+v, want %v over 4", p, got, want[p])
		}
	}
	if g := math.Cbrt(1.6 * 1.25 * 3); math.Abs(a.GeoMean-g) > 1e-9 {
		t.Errorf("geomean: got %v, want %v", a.GeoMean, g)
	}
	// Without the flagged result softmax still passes at turn 1; fast_p@N: turn 0 has relu, conv
	// and the flagged softmax.
	flagged := Build(s, Options{Metrics: metrics.Options{ExcludeFlags: []string{"torch_delegation"}}})
	if got := flagged.Arms[0].FastP[0].Value; got != 0.75 {
		t.Errorf("fast_0 without flagged: got %v", got)
	}
	if got := flagged.Turns[0].Fast0.Value; got != 0.5 {
		t.Errorf("fast_0@0 without flagged: got %v, want 0.5", got)
	}
	// softmax's first kernel delegates to torch (torch_delegation): a pass that is no solution.
	// Its unit still has a solution at turn 1, so fast_0 holds; @1 and @N at turn 0 count it
	// only counting flagged, and its attempt's class is flagged.
	if got := rep.Arms[0].Classes.Count[metrics.CatFlagged]; got != 1 {
		t.Errorf("flagged attempts: got %d, want 1", got)
	}
	if k := rep.AtK[0]; k.K != 1 || math.Abs(k.Fast0.Value-0.5) > 1e-9 || math.Abs(k.Fast0Flagged.Value-0.625) > 1e-9 {
		t.Errorf("fast_0@1: got %+v and %+v counting flagged, want 0.5 and 0.625", k.Fast0, k.Fast0Flagged)
	}
	if got := rep.Turns[0].Fast0.Value; got != 0.5 {
		t.Errorf("fast_0@0: got %v, want 0.5 (the delegating kernel is no solution)", got)
	}
	if !rep.Arms[0].AnyFlagged || rep.Arms[0].Fast0Flagged.Value != 0.75 {
		t.Errorf("counting flagged: %+v", rep.Arms[0])
	}
	// Against compile-default only relu has a baseline on its hardware: 1.28x.
	c := Build(s, Options{Metrics: metrics.Options{Baseline: "compile-default"}, P: []float64{0, 1}})
	// relu succeeds, gemm fails (no baseline needed), softmax and conv are left out.
	if got := c.Arms[0].FastP[1]; got.Value != 0.5 || got.N != 2 || got.Missing != 2 {
		t.Errorf("fast_1 vs compile-default: got %+v, want 1/2 with 2 missing", got)
	}
	if c.Missing != 2 {
		t.Errorf("missing baselines: got %d", c.Missing)
	}
}

func TestReportGolden(t *testing.T) {
	s := loadA(t)
	for _, tc := range []struct {
		name string
		opt  Options
	}{
		{"report.txt", Options{}},
		{"report-compile.txt", Options{Metrics: metrics.Options{Baseline: "compile-default", ExcludeFlags: []string{"torch_delegation"}}, P: []float64{0, 1, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Build(s, tc.opt).WriteText(&b); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, b.Bytes())
		})
	}
}

// In a study of several models, an evaluation no attempt names keeps its model.
func TestLoadSeveralModels(t *testing.T) {
	st := reporttest.Open(t)
	spec := `{"tasks":["kbp/l1/relu"],"models":[{"ref":"model/openai","name":"gpt"},{"ref":"model/replay"}],
		"backend":{"ref":"backend/cuda"},"strategy":{"ref":"strategy/oneshot"},"target":{"ref":"target/local"},"seed":3}`
	if err := st.PutStudy(store.Study{ID: "multimodel0000000000", Spec: json.RawMessage(spec)}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"gpt", "replay"} {
		ev := &store.Evaluation{Study: "multimodel0000000000", Model: m, Target: "local/cpu",
			Result: &sdk.Result{Task: sdk.Task{ID: "kbp/l1/relu", Level: 1}, Kernel: sdk.Kernel{Hash: m}, Verdict: sdk.Fail, ErrorClass: sdk.ClassCompile}}
		if err := st.PutEvaluation(ev); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Load(st, "multimodel", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var arms []string
	for _, u := range metrics.Units(s.Rows()) {
		arms = append(arms, u.Arm.String())
	}
	want := []string{"gpt + cuda + oneshot @ local seed 3", "replay + cuda + oneshot @ local seed 3"}
	if !reflect.DeepEqual(arms, want) {
		t.Errorf("arms: got %q, want %q", arms, want)
	}
}
