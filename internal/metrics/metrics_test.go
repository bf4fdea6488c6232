package metrics

import (
	"math"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

func pass(task string, speedup float64) Row {
	return Row{Study: "s", Task: task, Model: "m", Backend: "cpp", Strategy: "oneshot", Target: "local", Verdict: "pass", Speedup: speedup}
}

func fail(task, class string) Row {
	return Row{Study: "s", Task: task, Model: "m", Backend: "cpp", Strategy: "oneshot", Target: "local", Verdict: "fail", Class: class, Blame: BlameKernel}
}

func blamed(task string) Row {
	return Row{Study: "s", Task: task, Model: "m", Backend: "cpp", Strategy: "oneshot", Target: "local", Verdict: "error", Class: "platform_error", Blame: "platform"}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestFastP(t *testing.T) {
	a := pass("a", 1.5)
	a.Versus = map[string]float64{"compile-default": 1.2}
	a.Flags = []string{"timing_unresolved"} // a remark on the measurement: still a solution
	b := pass("b", 0.8)                     // no compile baseline on its hardware
	rows := []Row{a, b, fail("c", "compile_error"), blamed("d"),
		// a unit whose platform failed once but then got a verdict counts
		blamed("e"), fail("e", "output_mismatch")}
	units := Units(rows)
	if len(units) != 5 {
		t.Fatalf("units: got %d, want 5", len(units))
	}
	for _, tc := range []struct {
		name    string
		p       float64
		o       Options
		want    float64
		n, miss int
	}{
		{"fast_0", 0, Options{}, 2.0 / 4, 4, 0},
		{"fast_1", 1, Options{}, 1.0 / 4, 4, 0},
		{"strictly faster", 1.5, Options{}, 0, 4, 0},
		{"fast_0.5", 0.5, Options{}, 2.0 / 4, 4, 0},
		{"flag excluded", 0, Options{ExcludeFlags: []string{"timing_unresolved"}}, 1.0 / 4, 4, 0},
		{"other flag kept", 0, Options{ExcludeFlags: []string{"gpu_shared"}}, 2.0 / 4, 4, 0},
		{"compile fast_0 needs no baseline", 0, Options{Baseline: "compile-default"}, 2.0 / 4, 4, 0},
		{"compile fast_1 leaves unmeasured out", 1, Options{Baseline: "compile-default"}, 1.0 / 3, 3, 1},
		{"compile fast_1.2 strict", 1.2, Options{Baseline: "compile-default"}, 0, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := FastP(units, tc.p, tc.o)
			if !near(got.Value, tc.want) || got.N != tc.n || got.Missing != tc.miss {
				t.Errorf("got %+v, want %.3f over %d (%d missing)", got, tc.want, tc.n, tc.miss)
			}
		})
	}
}

func TestPassAtK(t *testing.T) {
	for _, tc := range []struct {
		n, c, k int
		want    float64
	}{
		{5, 2, 2, 1 - 3.0/10},     // C(3,2)/C(5,2)
		{5, 0, 2, 0},              // nothing succeeds
		{5, 4, 2, 1},              // n-c < k: any draw of two holds a success
		{10, 3, 5, 1 - 21.0/252},  // C(7,5)/C(10,5)
		{4, 1, 1, 0.25},           // @1 is the success rate
		{100, 1, 10, 1 - 0.9},     // C(99,10)/C(100,10) = 90/100
		{1000, 0, 100, 0},         // large n without overflow
		{1000, 500, 100, 1 - 0.0}, // product underflows towards 0, not NaN
	} {
		got := PassAtK(tc.n, tc.c, tc.k)
		if math.Abs(got-tc.want) > 1e-9 || math.IsNaN(got) {
			t.Errorf("PassAtK(%d,%d,%d): got %v, want %v", tc.n, tc.c, tc.k, got, tc.want)
		}
	}
}

func TestFastPAtK(t *testing.T) {
	var rows []Row
	// x: 5 samples, 2 faster than 1x
	rows = append(rows, pass("x", 1.5), pass("x", 2), pass("x", 0.9), fail("x", "runtime_error"), fail("x", "timeout"))
	// y: 4 samples, 1 faster than 1x; a blamed attempt is not a sample
	rows = append(rows, pass("y", 3), fail("y", "compile_error"), fail("y", "compile_error"), fail("y", "compile_error"), blamed("y"))
	units := Units(rows)
	got := FastPAtK(units, 1, 2, Options{})
	if want := (0.7 + 0.5) / 2; !near(got.Value, want) || got.N != 2 || got.Short != 0 {
		t.Errorf("fast_1@2: got %+v, want %.3f", got, want)
	}
	// k=5: x has exactly 5 (n-c=3<5: 1); y has 4 < 5: whether any succeeded (1)
	got = FastPAtK(units, 1, 5, Options{})
	if !near(got.Value, 1) || got.Short != 1 {
		t.Errorf("fast_1@5: got %+v, want 1 with 1 short", got)
	}
	// fast_0@1 is the mean success rate: x 3/5, y 1/4
	got = FastPAtK(units, 0, 1, Options{})
	if want := (0.6 + 0.25) / 2; !near(got.Value, want) {
		t.Errorf("fast_0@1: got %+v, want %.3f", got, want)
	}
}

func TestFastPAtTurn(t *testing.T) {
	at := func(r Row, turn int) Row { r.Turn = turn; return r }
	rows := []Row{
		at(fail("a", "output_mismatch"), 0), at(pass("a", 1.2), 1),
		at(pass("b", 0.9), 0), at(fail("b", "runtime_error"), 1), at(pass("b", 2), 2),
	}
	units := Units(rows)
	for turn, want := range []float64{0, 0.5, 1} {
		if got := FastPAtTurn(units, 1, turn, Options{}); !near(got.Value, want) || got.N != 2 {
			t.Errorf("fast_1@%d: got %+v, want %.2f", turn, got, want)
		}
	}
	if got := FastPAtTurn(units, 0, 0, Options{}); !near(got.Value, 0.5) {
		t.Errorf("fast_0@0: got %+v, want 0.5", got)
	}
	if got := MaxTurn(units); got != 2 {
		t.Errorf("max turn: got %d", got)
	}
}

func TestGeoMean(t *testing.T) {
	units := Units([]Row{pass("a", 2), pass("b", 0.5), fail("c", "timeout"), pass("d", 4), pass("d", 1)})
	// best per unit: 2, 0.5, 4 → (2·0.5·4)^(1/3) = 4^(1/3)
	got, n := GeoMean(units, Options{})
	if want := math.Cbrt(4); !near(got, want) || n != 3 {
		t.Errorf("got %v over %d, want %v over 3", got, n, want)
	}
}

func TestBootstrap(t *testing.T) {
	all := Units([]Row{pass("a", 2), pass("b", 3), pass("c", 1.1)})
	if ci := FastPCI(all, 0, Options{}); ci.Lo != 1 || ci.Hi != 1 {
		t.Errorf("every unit correct: got %+v, want [1, 1]", ci)
	}
	var rows []Row
	for i := range 40 {
		task := string(rune('A'+i%26)) + string(rune('a'+i/26))
		if i%4 == 0 {
			rows = append(rows, pass(task, 1.5))
		} else {
			rows = append(rows, fail(task, "compile_error"))
		}
	}
	units := Units(rows)
	ci := FastPCI(units, 0, Options{})
	if !(ci.Lo < 0.25 && 0.25 < ci.Hi) || ci.Lo < 0.05 || ci.Hi > 0.5 {
		t.Errorf("fast_0 = 0.25 over 40 units: interval %+v", ci)
	}
	if again := FastPCI(units, 0, Options{}); again != ci {
		t.Errorf("not deterministic: %+v then %+v", ci, again)
	}
}

func TestClasses(t *testing.T) {
	flagged := pass("a", 2)
	flagged.Flags = []string{"no_custom_kernel"}
	gen := Row{Study: "s", Task: "g", Class: ClassGeneration}
	rows := []Row{flagged, pass("b", 1), fail("c", "compile_error"), fail("d", "load_error"), fail("e", "illegal_memory_access"),
		fail("f", "output_mismatch"), fail("g", "timeout"), gen, blamed("h"), fail("i", "tampering")}
	got := Classes(rows, Options{})
	want := map[string]int{CatPass: 1, CatFlagged: 1, CatCompile: 2, CatRuntime: 1, CatMismatch: 1, CatTimeout: 1,
		CatGeneration: 1, CatNoVerdict: 1, CatTampering: 1}
	if got.Attempts != len(rows) {
		t.Errorf("attempts: got %d", got.Attempts)
	}
	for k, v := range want {
		if got.Count[k] != v {
			t.Errorf("%s: got %d, want %d (all: %v)", k, got.Count[k], v, got.Count)
		}
	}
	// A generation failure is judged (it counts against the model) and incorrect.
	if u := Units([]Row{gen}); !u[0].Judged() || FastP(u, 0, Options{}).N != 1 {
		t.Errorf("a generation failure must count as an incorrect unit")
	}
}

// A pass that carries a kernel flag is no solution: fast_p, @k, @N and the geometric mean leave
// it out, its class is flagged, and counting flagged puts it back. A measurement flag is not a
// kernel flag.
func TestKernelFlagsAreNoSolution(t *testing.T) {
	flagged := func(task string, speedup float64, flag string) Row {
		r := pass(task, speedup)
		r.Flags = []string{flag}
		return r
	}
	var rows []Row
	for i, f := range sdk.KernelFlags() {
		rows = append(rows, flagged(string(rune('a'+i)), 1.5, f))
	}
	rows = append(rows,
		pass("v", 1.2),                                      // a solution
		flagged("w", 2, "timing_unresolved"),                // a solution whose timing is loose
		flagged("x", 3, "no_custom_kernel"), pass("x", 0.9), // its solution is the slower kernel
	)
	units := Units(rows)
	n := len(sdk.KernelFlags()) + 3
	for _, tc := range []struct {
		name string
		got  Rate
		want float64
	}{
		{"fast_0", FastP(units, 0, Options{}), 3.0 / float64(n)},
		{"fast_1", FastP(units, 1, Options{}), 2.0 / float64(n)},
		{"fast_0 counting flagged", FastP(units, 0, Options{}.Flagged()), 1},
		{"fast_1 counting flagged", FastP(units, 1, Options{}.Flagged()), 1},
		{"fast_1@1", FastPAtK(units, 1, 1, Options{}), 2.0 / float64(n)},
		{"fast_1@1 counting flagged", FastPAtK(units, 1, 1, Options{}.Flagged()), (float64(n) - 0.5) / float64(n)},
		{"fast_1@N", FastPAtTurn(units, 1, 0, Options{}), 2.0 / float64(n)},
	} {
		if !near(tc.got.Value, tc.want) || tc.got.N != n {
			t.Errorf("%s: got %+v, want %.3f over %d", tc.name, tc.got, tc.want, n)
		}
	}
	if g, k := GeoMean(units, Options{}); k != 3 || !near(g, math.Cbrt(1.2*2*0.9)) {
		t.Errorf("geometric mean: got %v over %d, want the solutions' (1.2, 2, 0.9)", g, k)
	}
	if c := Classes(rows, Options{}); c.Count[CatFlagged] != len(sdk.KernelFlags())+1 || c.Count[CatPass] != 3 {
		t.Errorf("classes: %v", c.Count)
	}
	if !AnyFlagged(units) || AnyFlagged(Units([]Row{pass("v", 1), flagged("w", 1, "gpu_shared")})) {
		t.Errorf("AnyFlagged: a kernel flag is one, a measurement flag is not")
	}
}
