package rules

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
)

func analyzer(t *testing.T) Analyzer {
	t.Helper()
	py := os.Getenv("KBP_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	return Analyzer{Python: py}
}

const reference = `import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3).to(torch.float32)

    def forward(self, x):
        y = torch.nn.functional.relu(self.conv(x))
        return y.view(y.size(0), -1).softmax(dim=1)
`

const header = `import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_src = "__global__ void k() {}"
_ext = load_inline(name="e", cpp_sources="void f();", cuda_sources=_src, functions=["f"])
`

func TestReferenceOps(t *testing.T) {
	f, err := analyzer(t).Analyze(context.Background(), "", reference)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"conv", "relu", "softmax"}; !slices.Equal(f.ReferenceOps, want) {
		t.Errorf("reference ops %v, want %v (view and size are not operators)", f.ReferenceOps, want)
	}
	if f.ReferenceLowPrecision {
		t.Error("a float32 reference read as low precision")
	}
}

// How a candidate reaches the reference's operators: every spelling must be followed.
func TestReachedOps(t *testing.T) {
	cases := []struct {
		name, body, extra, want string
	}{
		{"direct", "return torch.softmax(x, 1)", "", "softmax"},
		{"functional alias by assignment", "return F.softmax(x, 1)", "F = torch.nn.functional\n", "softmax"},
		{"functional alias by import", "return G.relu(x)", "import torch.nn.functional as G\n", "relu"},
		{"from-import under another name", "return sm(x, 1)", "from torch import softmax as sm\n", "softmax"},
		{"getattr with a constant", "return getattr(torch, 'softmax')(x, 1)", "", "softmax"},
		{"a helper function", "return helper(x)", "def helper(x):\n    return torch.relu(x)\n", "relu"},
		{"a method of self", "return self.go(x)", "", "softmax"},
		{"a module built in __init__", "return self.conv(x)", "", "conv"},
		{"an operator stored on self", "return self.act(x)", "", "relu"},
		{"a lambda stored on self", "return self.fn(x)", "", "softmax"},
		{"an autograd Function", "return Fn.apply(x)", "class Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        return torch.relu(x)\n", "relu"},
		{"a tensor method", "return x.softmax(dim=1)", "", "softmax"},
		{"a Sequential built in __init__", "return self.seq(x)", "", "conv"},
		{"the reference's own forward through super()", "return super().forward(x)", "", "relu"},
		{"the @ operator", "return x @ x", "", "matmul"},
		{"aten through torch.ops", "return torch.ops.aten.relu.default(x)", "", "relu"},
		{"at:: inside the extension", "return _ext2.f(x)", "_ext2 = load_inline(name='g', cpp_sources='torch::Tensor f(torch::Tensor x) { return at::softmax(x, 1); }', functions=['f'])\n", "softmax"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := header + c.extra + `

class Base(nn.Module):
    def forward(self, x):
        return torch.relu(x)


class ModelNew(Base):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3)
        self.seq = nn.Sequential(nn.Conv2d(c, c, 3), nn.ReLU())
        self.act = torch.relu
        self.fn = lambda x: torch.softmax(x, 1)

    def go(self, x):
        return torch.softmax(x, 1)

    def forward(self, x):
        ` + c.body + "\n"
			f, err := analyzer(t).Analyze(context.Background(), src, reference)
			if err != nil {
				t.Fatal(err)
			}
			if f.ParseError != "" {
				t.Fatalf("parse error %s in\n%s", f.ParseError, src)
			}
			if _, ok := f.ReachedOps[c.want]; !ok {
				t.Errorf("reached %v, want %s among them", f.ReachedOps, c.want)
			}
		})
	}
	t.Run("nothing reached by an honest forward", func(t *testing.T) {
		src := header + "\n\nclass ModelNew(nn.Module):\n    def __init__(self, c):\n        super().__init__()\n        self.conv = nn.Conv2d(c, c, 3)\n\n    def forward(self, x):\n        return _ext.f(x, self.conv.weight, self.conv.bias)\n"
		f, err := analyzer(t).Analyze(context.Background(), src, reference)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.ReachedOps) != 0 || len(f.Kernels["cuda"].Launched) == 0 {
			t.Errorf("reached %v, launched %v", f.ReachedOps, f.Kernels["cuda"].Launched)
		}
	})
}

func TestPrecisionDowncastOnlyAgainstFullPrecision(t *testing.T) {
	set := MustParse([]byte("- {id: p, check: precision_downcast, action: warn, reason: lower precision}\n"))
	src := header + "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return _ext.f(x.to(torch.float16)).float()\n"
	bf16 := strings.Replace(reference, "torch.float32", "torch.bfloat16", 1)
	for _, c := range []struct {
		name, ref string
		want      bool
	}{{"float32 task", reference, true}, {"bfloat16 task", bf16, false}} {
		t.Run(c.name, func(t *testing.T) {
			f, err := analyzer(t).Analyze(context.Background(), src, c.ref)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(set.Apply(f, src)) == 1; got != c.want {
				t.Errorf("fired %v, want %v (downcasts %v)", got, c.want, f.Downcasts)
			}
		})
	}
}

func TestParseRejectsBadRules(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"unknown key", "- {id: a, check: threads, action: warn, reason: r, severity: high}", "field severity not found"},
		{"unknown check", "- {id: a, check: vibes, action: warn, reason: r}", "unknown check"},
		{"unknown action", "- {id: a, check: threads, action: block, reason: r}", "warn or reject"},
		{"no reason", "- {id: a, check: threads, action: warn}", "needs its reason"},
		{"duplicate id", "- {id: a, check: threads, action: warn, reason: r}\n- {id: a, check: exit, action: warn, reason: r}", "duplicate"},
		{"kernel check without language", "- {id: a, check: kernel_missing, action: warn, reason: r}", "takes a language"},
		{"language on another check", "- {id: a, check: threads, language: cuda, action: warn, reason: r}", "takes a language"},
		{"unknown language", "- {id: a, check: kernel_missing, language: cobol, action: warn, reason: r}", "takes a language"},
		{"pattern that misses its example", "- {id: a, check: pattern, pattern: 'os\\.fork', match: 'os._exit(0)', action: warn, reason: r}", "must match its own example"},
		{"bad flag name", "- {id: a, check: threads, action: warn, flag: Bad Flag, reason: r}", "stable name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

func TestApplyReportsEvidenceAndFlag(t *testing.T) {
	set := MustParse([]byte("- {id: deleg, check: torch_delegation, action: warn, flag: torch_delegation, reason: forward delegates}\n" +
		"- {id: part, check: torch_partial, action: warn, reason: some kept}\n" +
		"- {id: patch, check: harness_patching, action: reject, reason: patches}\n"))
	f := &Facts{ReferenceOps: []string{"relu", "softmax"}, ReachedOps: map[string]string{"relu": "torch.relu at line 9", "softmax": "F.softmax at line 10"},
		Patches: []string{"assigns time.perf_counter at line 3"}}
	got := set.Apply(f, "")
	if len(got) != 2 || got[0].Code != "deleg" || got[0].Flag != "torch_delegation" || got[0].Severity != "warning" ||
		!strings.Contains(got[0].Message, "relu (torch.relu at line 9)") || got[1].Code != "patch" || got[1].Severity != "error" {
		t.Errorf("got %+v", got)
	}
	f.ReachedOps = map[string]string{"relu": "torch.relu at line 9"}
	if got := set.Apply(f, ""); len(got) != 2 || got[0].Code != "part" {
		t.Errorf("one of two operators kept: got %+v", got)
	}
}

func TestAnalyzerWithoutPython(t *testing.T) {
	_, err := Analyzer{Python: "/nonexistent/python3"}.Analyze(context.Background(), "x = 1\n", "")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/python3") {
		t.Errorf("got %v, want an error naming the interpreter", err)
	}
}
