package faults

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/examples/kernels"
)

var update = flag.Bool("update", false, "rewrite testdata/mutants.golden")

// The mutants of the bundled kernels, and the classes that do not apply to each file, are pinned
// in a golden file: a change to a pattern or an example shows up as a diff to review.
func TestGenerateGolden(t *testing.T) {
	origins, err := kernels.Load()
	if err != nil {
		t.Fatal(err)
	}
	mutants, na := Generate(origins)
	var b strings.Builder
	for _, m := range mutants {
		fmt.Fprintf(&b, "%s\t%s\t%s\t%d site(s)\n", m.Origin.File, m.Class, m.Variant, m.Sites)
	}
	for _, n := range na {
		fmt.Fprintf(&b, "%s\t%s\tnot applicable\n", n.Origin.File, n.Class)
	}
	golden := filepath.Join("testdata", "mutants.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("mutants differ from %s (go test -run TestGenerateGolden -update rewrites it):\n%s", golden, got)
	}
}

// Every file gets, for every class, mutants or a not-applicable entry, never both and never
// neither; every mutant differs from its origin, says what it is, and is unique.
func TestGenerateAccountsForEveryFileAndClass(t *testing.T) {
	origins, err := kernels.Load()
	if err != nil {
		t.Fatal(err)
	}
	mutants, na := Generate(origins)
	type key struct {
		file  string
		class Class
	}
	got := map[key]int{}
	hashes := map[string]bool{}
	for _, m := range mutants {
		got[key{m.Origin.File, m.Class}]++
		if m.Source == m.Origin.Source || m.Sites == 0 {
			t.Errorf("%s: no change", m.Name())
		}
		if !strings.HasPrefix(m.Source, "# kbplatform fault campaign: a "+string(m.Class)+" mutant") || !strings.Contains(strings.SplitN(m.Source, "\n", 2)[0], m.Origin.Name()) {
			t.Errorf("%s: the first line does not say what it is: %q", m.Name(), strings.SplitN(m.Source, "\n", 2)[0])
		}
		if !strings.Contains(m.Source, "class ModelNew(") {
			t.Errorf("%s: lost ModelNew", m.Name())
		}
		if hashes[m.Hash] {
			t.Errorf("%s: the same source as another mutant", m.Name())
		}
		hashes[m.Hash] = true
	}
	for _, n := range na {
		k := key{n.Origin.File, n.Class}
		if got[k] > 0 {
			t.Errorf("%s %s: both mutated and not applicable", k.file, k.class)
		}
		got[k] = -1
	}
	for _, o := range origins {
		for _, c := range Classes() {
			if got[key{o.File, c}] == 0 {
				t.Errorf("%s %s: neither mutated nor counted as not applicable", o.File, c)
			}
		}
	}
	// Every class must apply somewhere, or the campaign would not test it at all.
	for _, c := range Classes() {
		n := 0
		for _, m := range mutants {
			if m.Class == c {
				n++
			}
		}
		if n == 0 {
			t.Errorf("class %s applies to no bundled kernel", c)
		}
	}
}

// Each rule on the idiom it is written for, and on near misses it must leave alone.
func TestRules(t *testing.T) {
	cases := []struct {
		class   Class
		backend string
		src     string
		want    string // "" when the class must not apply
	}{
		{OffByOne, "cpp", "for (; i < n; ++i) y[i] = x[i];", "for (; i < n - 1; ++i) y[i] = x[i];"},
		{OffByOne, "cpp", "for (; i < n; ++j) y[i] = x[i];", ""}, // not one loop variable
		{OffByOne, "cpp", "for (int64_t i = 0; i < d; ++i) y[i] = 0;", "for (int64_t i = 0; i < d - 1; ++i) y[i] = 0;"},
		{OffByOne, "cuda", "for (int64_t i = t; i < n; i += stride) y[i] = 0;", "for (int64_t i = t; i < n - 1; i += stride) y[i] = 0;"},
		{OffByOne, "triton", "mask = offs < n_elements\n", "mask = offs < n_elements - 1\n"},
		{TailUnhandled, "cpp", "for (; i < n; ++i) { y[i] = x[i]; }\nreturn y;", "/* remainder loop dropped */\nreturn y;"},
		{TailUnhandled, "cpp",
			"for (int64_t jr = 0; jr < nc; jr += NR) {\n    const int64_t nr = nc - jr < NR ? nc - jr : NR;",
			"for (int64_t jr = 0; jr + NR <= nc; jr += NR) {\n    const int64_t nr = nc - jr < NR ? nc - jr : NR;"},
		{TailUnhandled, "cpp", // the clamp is of another loop's variable
			"for (int64_t jr = 0; jr < nc; jr += NR) {\n    const int64_t nr = nc - ir < NR ? nc - ir : NR;", ""},
		{TailUnhandled, "triton", "grid = (triton.cdiv(n, _BLOCK),)", "grid = ((n // _BLOCK),)"},
		{WrongAxis, "cpp", "const int64_t d = x.size(-1);", "const int64_t d = x.size(0);"},
		{WrongAxis, "cpp", `TORCH_CHECK(x.size(-1) == w.size(1), "shape");`, ""}, // a check, not a computation
		{WrongAxis, "triton", "    M, K = a.shape\n", "    K, M = a.shape\n"},
		{WrongEpsilon, "cuda", "rstd = 1.0f / sqrtf(var + eps);", "rstd = 1.0f / sqrtf(var + 10.0 * eps);"},
		{WrongEpsilon, "cpp", "std::sqrt(var + static_cast<double>(eps))", "std::sqrt(var + 10.0 * static_cast<double>(eps))"},
		{WrongEpsilon, "cpp", "x + epsilon_count", ""},
		{NegativeBranch, "cpp", "dst[i] = v < 0.0f ? 0.0f : v;", "dst[i] = v;"},
		{NegativeBranch, "cpp", "dst[i] = v < 0.0f ? 0.0f : w;", ""},
		{NegativeBranch, "triton", "y = tl.where(x < 0.0, 0.0, x)", "y = x"},
		{LowPrecision, "cpp", "float acc[kLanes] = {0.0f};", "c10::BFloat16 acc[kLanes] = {};"},
		{LowPrecision, "triton", `acc = tl.dot(a, b, acc, input_precision="ieee")`, "acc = tl.dot(a.to(tl.float16), b.to(tl.float16), acc)"},
		{Unwritten, "cuda", "const int64_t rows = n / d;", "const int64_t rows = (n / d) / 2;"},
		{MissingSync, "cuda", "sh[w] = s;\n    __syncthreads();\n", "sh[w] = s;\n    (void)0; /* __syncthreads() dropped */\n"},
		{MissingSync, "cpp", "__syncthreads();", ""}, // GPU only
	}
	for _, c := range cases {
		t.Run(string(c.class)+"/"+c.backend+"/"+c.src, func(t *testing.T) {
			ms := mutate(c.class, kernels.Entry{File: "x.py", Backend: c.backend, Source: c.src})
			if c.want == "" {
				if len(ms) != 0 {
					t.Fatalf("got a mutant, want none:\n%s", ms[0].Source)
				}
				return
			}
			if len(ms) != 1 {
				t.Fatalf("got %d mutants, want 1", len(ms))
			}
			if got := strings.SplitN(ms[0].Source, "\n", 2)[1]; got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

// Mutants of Python-level code (every Triton mutant, and every cached_result mutant) must still be
// Python: a mutant that does not load tests nothing. The C++ mutants are built by the campaign
// itself, which counts one that does not build as invalid.
func TestPythonOfMutantsParses(t *testing.T) {
	py := os.Getenv("KBP_PYTHON")
	if py == "" {
		py = "python3"
	}
	if _, err := exec.LookPath(py); err != nil {
		t.Skipf("no %s to parse with", py)
	}
	origins, err := kernels.Load()
	if err != nil {
		t.Fatal(err)
	}
	mutants, _ := Generate(origins)
	dir := t.TempDir()
	var files []string
	for i, m := range mutants {
		f := filepath.Join(dir, fmt.Sprintf("m%03d.py", i))
		if err := os.WriteFile(f, []byte(m.Source), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	script := "import ast, sys\nbad = 0\nfor f in sys.argv[1:]:\n    try:\n        ast.parse(open(f).read(), f)\n    except SyntaxError as e:\n        print(f, e)\n        bad += 1\nsys.exit(1 if bad else 0)\n"
	out, err := exec.Command(py, append([]string{"-c", script}, files...)...).CombinedOutput()
	if err != nil {
		for i, m := range mutants {
			if strings.Contains(string(out), fmt.Sprintf("m%03d.py", i)) {
				t.Errorf("%s does not parse", m.Name())
			}
		}
		t.Fatalf("%v\n%s", err, out)
	}
}
