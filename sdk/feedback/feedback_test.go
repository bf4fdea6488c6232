package feedback

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

var update = flag.Bool("update", false, "rewrite the golden feedback files in testdata/")

const kernelA = `import torch
from torch.utils.cpp_extension import load_inline

cpp_src = """
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    for (int64_t i = 0; i < x.numel(); i++) y.data_ptr<float>()[i] = x.data_ptr<float>()[i] > 0 ? x.data_ptr<float>()[i] : 0;
    return y;
}
"""

mod = load_inline(name="relu_a", cpp_sources=cpp_src, functions=["relu"])


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return mod.relu(x)
`

// kernelB changes the kernel string, forward, and adds a helper: what a refinement turn does.
const kernelB = `import torch
import math
from torch.utils.cpp_extension import load_inline

cpp_src = """
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    auto n = x.numel() - 1;
    for (int64_t i = 0; i < n; i++) y.data_ptr<float>()[i] = x.data_ptr<float>()[i] > 0 ? x.data_ptr<float>()[i] : 0;
    return y;
}
"""

mod = load_inline(name="relu_b", cpp_sources=cpp_src, functions=["relu"])


def contiguous(x):
    return x.contiguous()


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        # the kernel wants contiguous input
        return mod.relu(contiguous(x))
`

// mismatched is what the contract reports for kernelB: its last element is never written.
func mismatched() *sdk.Result {
	return &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassMismatch, Phase: "correctness",
		Trials: []sdk.Trial{{Seed: 1, Dist: "normal", OK: false}, {Seed: 2, Dist: "uniform", OK: false}},
		Mismatch: &sdk.Mismatch{Phase: "correctness", Seed: 1, Dist: "normal", Kind: "values",
			Message: "1 of 4096 elements (0.0244%) differ beyond atol=1e-05 rtol=1e-05",
			Detail: map[string]any{"ok": false, "kind": "values", "shape": []any{64.0, 64.0}, "dtype": "float32",
				"atol": 1e-05, "rtol": 1e-05, "wrong": 1.0, "total": 4096.0, "wrong_fraction": 1.0 / 4096,
				"max_abs_err": 2.53125, "mean_abs_err": 2.53125, "max_rel_err": 1.0,
				"first_wrong_index": []any{63.0, 63.0}, "first_wrong_out": 0.0, "first_wrong_ref": 2.53125,
				"out_nonfinite": 0.0, "ref_nonfinite": 0.0, "out_nan": 0.0,
				"pattern": map[string]any{"kind": "col_tail", "summary": "all wrong elements are in the last 1 of 64 columns (from column 63): a bounds or remainder bug?"}}}}
}

// passed is a correct kernel with its profile.
func passed() *sdk.Result {
	return &sdk.Result{Verdict: sdk.Pass, Trials: []sdk.Trial{{OK: true}, {OK: true}, {OK: true}},
		Timing: &sdk.Timing{Speedup: 1.374, Candidate: sdk.Stats{Median: 0.0412}, Reference: sdk.Stats{Median: 0.0566}},
		Profile: &sdk.Profile{Tool: "torch.profiler", TotalUS: 41.5, Kernels: []sdk.KernelTime{
			{Name: "relu_kernel(float const*, float*, long)", Calls: 1, TotalUS: 30.1, Share: 0.7253, Custom: true},
			{Name: "aten::empty_like", Calls: 1, TotalUS: 8.2, Share: 0.1976},
			{Name: "aten::contiguous", Calls: 1, TotalUS: 3.2, Share: 0.0771},
		}}}
}

// compileError has a compiler log far longer than feedback may carry.
func compileError() *sdk.Result {
	log := strings.Repeat("relu.cpp:3:5: note: candidate template ignored\n", 200) + "relu.cpp:7:3: error: use of undeclared identifier 'n'\n" +
		strings.Repeat("relu.cpp:3:5: note: candidate template ignored\n", 200) + "relu.cpp:9:1: error: expected ';' after return statement\n"
	return &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassCompile, Phase: "compile", Message: "building the extension failed",
		Compile: &sdk.CompileResult{OK: false, ErrorClass: sdk.ClassCompile, Log: log}}
}

func python(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	return p
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test -update rewrites it):\n%s", name, path, got)
	}
}

func TestBuild(t *testing.T) {
	py := python(t)
	ctx := context.Background()
	a := &Kernel{Turn: 0, Source: kernelA, Result: passed()}
	b := &Kernel{Turn: 1, Source: kernelB, Result: mismatched()}
	noCode := &Kernel{Turn: 2, Reply: "I cannot help with that.", NoCode: "no code in the reply: no ```python block"}
	cases := []struct {
		name      string
		b         Builder
		req       Request
		kind      string
		want, not []string
	}{
		{"raw-G", Builder{Parts: G, Format: Raw}, Request{Latest: b}, "raw G",
			[]string{"mod.relu(contiguous(x))", "Improve this kernel"}, []string{"Verdict", "max abs error", "Profile"}},
		{"raw-GE-mismatch", Builder{Parts: GE, Format: Raw}, Request{Latest: b}, "raw G+E",
			[]string{"output_mismatch", "2.531", "index [63, 63]", "last 1 of 64 columns", "0.02441%", "Fix the problems"}, []string{"### Profile"}},
		{"raw-GEP-pass", Builder{Parts: GEP, Format: Raw}, Request{Latest: a}, "raw G+E+P",
			[]string{"1.374x", "torch.profiler", "| 72.5% | 30.1 | 1 | yours | relu_kernel", "Your own kernels take 72.5%", "Make it faster"}, nil},
		{"raw-GEP-fail", Builder{Parts: GEP, Format: Raw}, Request{Latest: b}, "raw G+E+P",
			[]string{"No profile: only a correct kernel is profiled"}, nil},
		{"raw-no-code", Builder{Parts: GE, Format: Raw}, Request{Latest: noCode}, "raw G+E",
			[]string{"no usable code", "I cannot help with that.", "No kernel was evaluated"}, nil},
		{"ast-diff", Builder{Parts: GE, Format: ASTDiff, Differ: Differ{Python: py}}, Request{Latest: b, Before: a}, "ast-diff G+E",
			[]string{"- changed assignment cpp_src (string):", "+    auto n = x.numel() - 1;", "- changed method ModelNew.forward:",
				"- added function contiguous", "- changed imports:", "your reply above"},
			[]string{"class ModelNew(torch.nn.Module):\n    def __init__"}},
		{"ast-diff-first", Builder{Parts: GE, Format: ASTDiff, Differ: Differ{Python: py}}, Request{Latest: a}, "ast-diff G+E",
			[]string{"no earlier kernel to compare it with"}, []string{"load_inline"}},
		{"contrastive", Builder{Parts: GEP, Format: Contrastive, Differ: Differ{Python: py}}, Request{Latest: b, Best: a}, "contrastive G+E+P",
			[]string{"best kernel so far (turn 0)", "latest kernel (turn 1), which did worse", "How it differs", "1.374x", "last 1 of 64 columns", "Start from your best kernel"}, nil},
		{"contrastive-same", Builder{Parts: GE, Format: Contrastive}, Request{Latest: a, Best: a}, "contrastive G+E",
			[]string{"which is also your latest"}, []string{"did worse"}},
		{"backtrack-raw", Builder{Parts: GE, Format: Raw}, Request{Latest: a, Best: a, Regressed: b}, "raw G+E",
			[]string{"Your attempt of turn 1 did worse", "wrong: output_mismatch, 0.02441% of elements wrong, max abs error 2.531", "go back to the best kernel (turn 0)"}, nil},
		{"compile-error", Builder{Parts: GE, Format: Raw}, Request{Latest: &Kernel{Turn: 3, Source: kernelA, Result: compileError()}}, "raw G+E",
			[]string{"compile_error (the kernel did not compile)", "bytes of the compiler output left out", "expected ';' after return statement",
				"Errors in the compiler output:\n```text\nrelu.cpp:7:3: error: use of undeclared identifier 'n'\nrelu.cpp:9:1: error: expected ';'"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, kind := c.b.Build(ctx, c.req)
			if kind != c.kind {
				t.Errorf("kind %q, want %q", kind, c.kind)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in:\n%s", w, got)
				}
			}
			for _, n := range c.not {
				if strings.Contains(got, n) {
					t.Errorf("unexpected %q in:\n%s", n, got)
				}
			}
			again, _ := c.b.Build(ctx, c.req)
			if again != got {
				t.Error("the same request gave different feedback")
			}
			golden(t, c.name, got)
		})
	}
}

// Every piece is bounded: a huge log, source or reply cannot blow up the prompt.
func TestBounded(t *testing.T) {
	huge := strings.Repeat("x = 1  # padding the file\n", 20000)
	res := compileError()
	res.Compile.Log = strings.Repeat("é error line\n", 100000)
	res.Traceback = strings.Repeat("  File \"x.py\", line 1\n", 100000)
	res.Message = strings.Repeat("m", 100000)
	k := &Kernel{Turn: 1, Source: huge, Result: res}
	got, _ := Builder{Parts: GEP, Format: Raw}.Build(context.Background(), Request{Latest: k})
	if max := MaxSource + 3*MaxLog + 4096; len(got) > max {
		t.Errorf("feedback is %d bytes, more than %d", len(got), max)
	}
	for _, w := range []string{"bytes of the source left out", "bytes of the compiler output left out", "bytes of the message left out", "bytes left out"} {
		if !strings.Contains(got, w) {
			t.Errorf("no note %q", w)
		}
	}
	if !strings.Contains(got, "é error line") || strings.Contains(got, "\ufffd") {
		t.Error("a cut must keep whole runes")
	}
}

// Without Python, or when a kernel does not parse, the diff is plain text and says why.
func TestDiffFallback(t *testing.T) {
	ctx := context.Background()
	got := Differ{Python: filepath.Join(t.TempDir(), "no-python")}.Diff(ctx, kernelA, kernelB)
	if !strings.Contains(got, "(a plain text diff: python") || !strings.Contains(got, "+    auto n = x.numel() - 1;") {
		t.Errorf("no text diff without python:\n%s", got)
	}
	py := python(t)
	got = Differ{Python: py}.Diff(ctx, kernelA, kernelB+"\ndef broken(:\n")
	if !strings.Contains(got, "the later kernel does not parse") || !strings.Contains(got, "+def broken(:") {
		t.Errorf("no text diff for a kernel that does not parse:\n%s", got)
	}
	got = Differ{Python: py}.Diff(ctx, kernelA, strings.ReplaceAll(kernelA, "    def forward", "\n    # comment\n    def forward"))
	if !strings.Contains(got, "no change to any definition") {
		t.Errorf("layout and comments are no change:\n%s", got)
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		parts, format string
		ok            bool
	}{{"", "", true}, {"G+E+P", "ast-diff", true}, {"G", "contrastive", true}, {"E", "raw", false}, {"G+E", "diff", false}, {"g+e", "raw", false}} {
		_, perr := ParseParts(c.parts)
		_, ferr := ParseFormat(c.format)
		if got := perr == nil && ferr == nil; got != c.ok {
			t.Errorf("%q %q: ok %v, want %v (%v %v)", c.parts, c.format, got, c.ok, perr, ferr)
		}
	}
}

// P lists the most expensive kernels first, at most maxKernels of them, the rest summed.
func TestProfileOrderAndBound(t *testing.T) {
	r := passed()
	r.Profile.Kernels = nil
	for i := 0; i < 12; i++ {
		r.Profile.Kernels = append(r.Profile.Kernels, sdk.KernelTime{Name: "k" + string(rune('a'+i)), Calls: 1, TotalUS: float64(i + 1), Share: float64(i+1) / 78})
	}
	got := Profile(r)
	first := strings.Index(got, "| kl |")
	second := strings.Index(got, "| kk |")
	if first < 0 || second < 0 || first > second || strings.Contains(got, "| kd |") || !strings.Contains(got, "| 12.8% | | | | 4 more kernels |") {
		t.Errorf("profile:\n%s", got)
	}
}
