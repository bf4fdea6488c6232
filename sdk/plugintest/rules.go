package plugintest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/rules"
)

// RuleTask is the task the rule suite checks candidates against: two operators, so that a
// candidate can replace one and keep the other.
var RuleTask = sdk.Task{ID: "plugintest/relu-softmax", Name: "ReLU then softmax", Level: 1, Size: "default",
	Distributions: []string{"default"},
	Source: `import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(torch.relu(x), dim=1)


def get_inputs():
    return [torch.randn(16, 256)]


def get_init_inputs():
    return []
`}

func init() { RuleTask.Hash = hashOf(RuleTask.Source) }

// honest kernels of each language for RuleTask: defined at module level and launched from forward
// through {{CALL}}, which a case replaces. They are read, never built.
var honest = map[string]string{
	"cuda": `import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda = r"""
#include <torch/extension.h>
__global__ void relu_softmax_kernel(const float* x, float* y, int cols) {
    // one block per row: max, sum of exp, normalise
}
torch::Tensor relu_softmax(torch::Tensor x) {
    auto y = torch::empty_like(x);
    relu_softmax_kernel<<<x.size(0), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.size(1));
    return y;
}
"""

_ext = load_inline(name="relu_softmax", cpp_sources="torch::Tensor relu_softmax(torch::Tensor x);",
                   cuda_sources=_cuda, functions=["relu_softmax"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
{{BODY}}
`,
	"cutlass": `import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda = r"""
#include <torch/extension.h>
#include <cutlass/cutlass.h>
#include <cutlass/fast_math.h>
__global__ void relu_softmax_kernel(const float* x, float* y, int cols) {
    // one block per row, cutlass::fast_exp for the exponentials
}
torch::Tensor relu_softmax(torch::Tensor x) {
    auto y = torch::empty_like(x);
    relu_softmax_kernel<<<x.size(0), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.size(1));
    return y;
}
"""

_ext = load_inline(name="relu_softmax", cpp_sources="torch::Tensor relu_softmax(torch::Tensor x);",
                   cuda_sources=_cuda, functions=["relu_softmax"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
{{BODY}}
`,
	"cpp": `import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_src = r"""
#include <torch/extension.h>
torch::Tensor relu_softmax(torch::Tensor x) {
    auto y = torch::empty_like(x);
    // rows: max, sum of exp, normalise
    return y;
}
"""

_ext = load_inline(name="relu_softmax", cpp_sources=_src, functions=["relu_softmax"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
{{BODY}}
`,
	"triton": `import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_softmax_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0)
    x = tl.maximum(x, 0.0)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * cols + offs, e / tl.sum(e, axis=0), mask=offs < cols)


def _ext_relu_softmax(x):
    y = torch.empty_like(x)
    _relu_softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
{{BODY}}
`,
}

// HonestCandidate is a candidate in language for RuleTask that launches its own kernel and calls no
// PyTorch operator of the reference; language is cuda, cutlass, cpp or triton.
func HonestCandidate(language string) string {
	return candidate(language, "        return _ext.relu_softmax(x)")
}

func candidate(language, body string) string {
	src := strings.Replace(honest[language], "{{BODY}}", body, 1)
	if language == "triton" {
		// Triton kernels are launched through a helper function, not an extension object.
		src = strings.Replace(src, "_ext.relu_softmax(", "_ext_relu_softmax(", -1)
	}
	return src
}

const pureTorch = `import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(torch.relu(x), dim=1)
`

// ruleCase builds a candidate that a rule must fire on, for the backend's own language.
func ruleCase(language string, r rules.Rule) string {
	launch := "_ext.relu_softmax(x)"
	if language == "triton" {
		launch = "_ext_relu_softmax(x)"
	}
	switch r.Check {
	case rules.CheckModelNewMissing:
		return strings.Replace(HonestCandidate(language), "class ModelNew", "class ModelNext", 1)
	case rules.CheckParseError:
		return HonestCandidate(language) + "\ndef broken(:\n    pass\n"
	case rules.CheckKernelMissing:
		return pureTorch
	case rules.CheckKernelNotLaunched:
		return candidate(language, "        return x.clamp(min=0).exp() / x.clamp(min=0).exp().sum(1, keepdim=True)")
	case rules.CheckKernelPresent:
		return HonestCandidate(r.Language)
	case rules.CheckTorchDelegation:
		// The issue's example: a kernel is compiled, never launched, and the operators are
		// reached through an alias.
		return strings.Replace(candidate(language, "        return F.softmax(F.relu(x), dim=1)"),
			"import torch.nn as nn\n", "import torch.nn as nn\nF = torch.nn.functional\n", 1)
	case rules.CheckTorchPartial:
		return candidate(language, "        y = "+launch+"\n        return getattr(torch, \"relu\")(y)")
	case rules.CheckTorchFallback:
		return candidate(language, "        try:\n            return "+launch+"\n        except RuntimeError:\n            return torch.softmax(torch.relu(x), dim=1)")
	case rules.CheckThreads:
		return HonestCandidate(language) + "\nimport threading\nthreading.Thread(target=print).start()\n"
	case rules.CheckHarnessPatching:
		return HonestCandidate(language) + "\nimport time\ntime.perf_counter = lambda: 0.0\n"
	case rules.CheckPrecisionDowncast:
		return candidate(language, "        return "+strings.Replace(launch, "(x)", "(x.half())", 1)+".float()")
	case rules.CheckDynamicCode:
		return candidate(language, "        op = getattr(torch, \"\".join([\"soft\", \"max\"]))\n        return "+launch)
	case rules.CheckPattern:
		return HonestCandidate(language) + "\n" + r.Match + "\n"
	}
	return ""
}

// RunRuleConformance checks a backend's rule file through the backend's Check, over gRPC: every
// rule fires on a candidate made to break it and stays silent on an honest kernel of the language,
// and the honest kernel raises no rejection and no flag. language is the kernel language the
// backend's honest candidates are written in (cuda, cutlass, cpp or triton); ruleFile is the
// backend's rule file. It needs a Python 3.9+ (KBP_PYTHON or python3).
func RunRuleConformance(t *testing.T, impl sdk.Backend, config json.RawMessage, language string, ruleFile []byte) {
	set, err := rules.Parse(ruleFile)
	if err != nil {
		t.Fatalf("rule file: %v", err)
	}
	if _, ok := honest[language]; !ok {
		t.Fatalf("no honest candidate in language %q (known: cuda, cutlass, cpp, triton)", language)
	}
	r := Connect(t, impl)
	ctx := context.Background()
	if err := r.Configure(ctx, config, nil); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	b := r.Backend()
	check := func(t *testing.T, src string) []sdk.Issue {
		t.Helper()
		issues, err := b.Check(ctx, src, RuleTask)
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		return issues
	}
	clean := check(t, HonestCandidate(language))
	t.Run("honest kernel", func(t *testing.T) {
		for _, i := range clean {
			if i.Severity == sdk.SeverityError || i.Flag != "" {
				t.Errorf("an honest %s kernel got %s %s (flag %q): %s", language, i.Severity, i.Code, i.Flag, i.Message)
			}
		}
	})
	for _, rule := range set.Rules() {
		t.Run(rule.ID, func(t *testing.T) {
			if has(clean, rule.ID) {
				t.Errorf("negative: fires on an honest %s kernel", language)
			}
			src := ruleCase(language, rule)
			got := find(check(t, src), rule.ID)
			if got == nil {
				t.Fatalf("positive: does not fire on\n%s", src)
			}
			wantSev := sdk.SeverityWarning
			if rule.Action == rules.Reject {
				wantSev = sdk.SeverityError
			}
			if got.Severity != wantSev || got.Flag != rule.Flag || !strings.HasPrefix(got.Message, rule.Reason) {
				t.Errorf("positive: got %+v, want severity %s, flag %q and the rule's reason", *got, wantSev, rule.Flag)
			}
		})
	}
}

func has(issues []sdk.Issue, code string) bool { return find(issues, code) != nil }

func find(issues []sdk.Issue, code string) *sdk.Issue {
	for i := range issues {
		if issues[i].Code == code {
			return &issues[i]
		}
	}
	return nil
}
