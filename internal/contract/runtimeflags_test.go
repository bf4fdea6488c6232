package contract

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

func TestRuntimeFlags(t *testing.T) {
	own := kernelsOf("__global__ void relu_kernel(float* x) {}")
	gpu := func(rows ...evidenceRow) workerEvidence {
		return workerEvidence{Device: "cuda", Rows: rows, Launches: len(rows)}
	}
	atenRelu := evidenceRow{Name: "void at::native::vectorized_elementwise_kernel<4>(int)", Calls: 1, US: 900, Kind: "kernel"}
	mine := evidenceRow{Name: "relu_kernel(float*)", Calls: 1, US: 100, Kind: "kernel"}
	fine := &measuredPrecision{Dtype: "float32", CandidateError: 3e-8, ReferenceError: 2e-8}
	half := &measuredPrecision{Dtype: "float32", CandidateError: 2.8e-4, ReferenceError: 2e-8}
	cases := []struct {
		name   string
		ev     workerEvidence
		prec   *measuredPrecision
		source string
		want   []string // flag names
		reason string   // substring of the first flag's reason
	}{
		{"honest gpu", gpu(mine), fine, "", nil, ""},
		{"delegates on gpu", gpu(atenRelu), fine, "", []string{sdk.FlagNoCustomKernel}, "none of the 1 device kernels"},
		{"trivial own kernel beside delegation", gpu(atenRelu, mine), fine, "", nil, ""},
		{"extension delegating inside", workerEvidence{Device: "cuda", Rows: []evidenceRow{atenRelu}, ExtCalls: []evidenceRow{{Name: "m.f", Calls: 2}}}, fine, "",
			[]string{sdk.FlagNoCustomKernel}, "called 2 time(s) and launched none of their own"},
		{"nothing ran", workerEvidence{Device: "cuda"}, fine, "", []string{sdk.FlagNoCustomKernel}, "no device kernel ran"},
		{"profiler saw launches but no kernels", workerEvidence{Device: "cuda", Launches: 3}, fine, "", nil, ""},
		{"profiler failed", workerEvidence{Device: "cuda", Error: "CUPTI"}, nil, "", nil, ""},
		{"cpu extension called", workerEvidence{Device: "cpu", Extensions: []string{"m"}, ExtCalls: []evidenceRow{{Name: "m.f", Calls: 1}}}, fine, "", nil, ""},
		{"cpu extension never called", workerEvidence{Device: "cpu", Extensions: []string{"m"}, Rows: []evidenceRow{{Name: "aten::relu", US: 5, Kind: "op"}}}, fine, "",
			[]string{sdk.FlagNoCustomKernel}, "built m but its forward called none"},
		{"cpu no extension", workerEvidence{Device: "cpu"}, nil, "", []string{sdk.FlagNoCustomKernel}, "built no extension"},
		{"half precision", gpu(mine), half, "", []string{sdk.FlagPrecisionDowncast}, "bits"},
		{"triton tf32 default", gpu(mine), half, "acc = tl.dot(a, b, acc)", []string{sdk.FlagPrecisionDowncast}, "tf32: "},
		{"triton ieee dot is not tf32", gpu(mine), half, `acc = tl.dot(a, b, acc, input_precision="ieee")`, []string{sdk.FlagPrecisionDowncast}, "runtime: measured"},
		{"eager itself inexact", gpu(mine), &measuredPrecision{Dtype: "float32", CandidateError: 2e-4, ReferenceError: 1e-4}, "", nil, ""},
		{"precision skipped", gpu(mine), &measuredPrecision{Skipped: "too large"}, "", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			flags := runtimeFlags(c.ev, own, c.prec, c.source)
			var names []string
			for _, f := range flags {
				names = append(names, f.Name)
			}
			if strings.Join(names, ",") != strings.Join(c.want, ",") {
				t.Fatalf("flags %v, want %v (%+v)", names, c.want, flags)
			}
			if c.reason != "" && !strings.Contains(flags[0].Reason, c.reason) {
				t.Errorf("reason %q does not contain %q", flags[0].Reason, c.reason)
			}
		})
	}
}

func TestBuildProfile(t *testing.T) {
	own := kernelsOf("__global__ void mine(float* x) {}")
	var rows []evidenceRow
	for i := range ProfileRows + 5 {
		rows = append(rows, evidenceRow{Name: "void at::native::k" + string(rune('a'+i)) + "(int)", Calls: 1, US: float64(i + 1), Kind: "kernel"})
	}
	rows = append(rows, evidenceRow{Name: "mine(float*)", Calls: 2, US: 100, Kind: "kernel"})
	p := buildProfile(workerEvidence{Device: "cuda", Rows: rows}, own)
	if p == nil || len(p.Kernels) != ProfileRows+1 {
		t.Fatalf("got %+v", p)
	}
	if k := p.Kernels[0]; k.Name != "mine(float*)" || !k.Custom || k.Calls != 2 {
		t.Errorf("first row %+v", k)
	}
	last := p.Kernels[ProfileRows]
	if !strings.HasPrefix(last.Name, "other (6 more)") || last.TotalUS != 1+2+3+4+5+6 {
		t.Errorf("other row %+v", last)
	}
	var share float64
	for _, k := range p.Kernels {
		share += k.Share
	}
	if share < 0.999 || share > 1.001 {
		t.Errorf("shares sum to %v", share)
	}
	cpu := buildProfile(workerEvidence{Device: "cpu", WallUS: 200, ExtCalls: []evidenceRow{{Name: "m.f", Calls: 1, US: 150}},
		Rows: []evidenceRow{{Name: "aten::empty", Calls: 1, US: 2, Kind: "op"}}}, own)
	if cpu == nil || cpu.TotalUS != 200 || !cpu.Kernels[0].Custom || cpu.Kernels[1].Custom || cpu.Kernels[0].Share != 0.75 {
		t.Errorf("cpu profile %+v", cpu)
	}
	if buildProfile(workerEvidence{Device: "cuda"}, own) != nil {
		t.Error("an empty profile is not nil")
	}
}

func TestEvidenceWarnings(t *testing.T) {
	own := kernelsOf("__global__ void mine(float* x) {}")
	// 25 library kernels and the candidate's own at 2% of the time: the share is counted over
	// every kernel, not only those the stored profile keeps.
	rows := []evidenceRow{{Name: "mine(float*)", US: 20, Kind: "kernel"}}
	for i := range 25 {
		rows = append(rows, evidenceRow{Name: fmt.Sprintf("void at::native::k%d<float>(float*)", i), US: 39.2, Kind: "kernel"})
	}
	w := evidenceWarnings(workerEvidence{Device: "cuda", Rows: rows}, own)
	if len(w) != 1 || !strings.Contains(w[0], "2.0%") {
		t.Errorf("got %q", w)
	}
	if w := evidenceWarnings(workerEvidence{Device: "cuda", Rows: rows[:1]}, own); len(w) != 0 {
		t.Errorf("own kernels only: got %q", w)
	}
	if w := evidenceWarnings(workerEvidence{Device: "cuda", Launches: 2}, own); len(w) != 1 || !strings.Contains(w[0], "not decided") {
		t.Errorf("got %q", w)
	}
	noop := workerEvidence{Device: "cpu", ExtCalls: []evidenceRow{{Name: "m.noop", US: 5}}, Rows: []evidenceRow{{Name: "aten::relu", US: 995, Kind: "op"}}}
	if w := evidenceWarnings(noop, own); len(w) != 1 || !strings.Contains(w[0], "extension functions took 0.5%") {
		t.Errorf("cpu: got %q", w)
	}
	honest := workerEvidence{Device: "cpu", ExtCalls: []evidenceRow{{Name: "m.relu", US: 20}}, Rows: []evidenceRow{{Name: "aten::empty_like", US: 1, Kind: "op"}}}
	if w := evidenceWarnings(honest, own); len(w) != 0 {
		t.Errorf("honest cpu: got %q", w)
	}
}
