// Package cpp is the C++ (CPU) backend: kernels written as C++ functions compiled with
// torch.utils.cpp_extension.load_inline(cpp_sources=...) and called from ModelNew.
package cpp

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/kbplatform/kbplatform/sdk"
)

// Version of the backend.
const Version = "0.1.0"

// Backend implements sdk.Backend.
type Backend struct {
	sdk.NoConfig
}

var _ sdk.Backend = (*Backend)(nil)

// New returns the backend.
func New() *Backend { return &Backend{} }

// Info identifies the plugin.
func (*Backend) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindBackend, Name: "cpp", Version: Version,
		Capabilities: []string{"device:cpu", sdk.VariantOneShot, sdk.VariantFewShot, sdk.VariantHardwareAware},
		Description:  "C++ CPU kernels through torch.utils.cpp_extension.load_inline"}
}

const system = "You are an expert in high-performance C++ for CPUs and in PyTorch's C++ extension API. " +
	"You write kernels that are correct first and fast second."

const instructions = `You write custom C++ kernels to replace the PyTorch operators in the architecture below and make it faster on a CPU.

You may replace any subset of the operators: fuse several into one kernel, change the algorithm (an online softmax, say), or leave some in PyTorch. Write the kernels as C++ functions over raw pointers (tensor.data_ptr<float>()) and build them in the Python file with torch.utils.cpp_extension.load_inline(name=..., cpp_sources=..., functions=[...], extra_cflags=["-O3"]). The code must compile as C++14. No CUDA.

Rules:
- Name the new architecture ModelNew (a torch.nn.Module). Its constructor takes the same arguments as Model's and creates its parameters in the same order with the same shapes, so that the same random seed gives both the same weights.
- ModelNew.forward takes the same inputs as Model.forward and returns the same outputs (shape, dtype, values within float tolerance) for any inputs of these shapes, on every call.
- Do not write into the inputs, do not cache results between calls, do not start threads that outlive a call, and do not touch torch or time functions.
- Output one Python code block with the complete file, and nothing else: no tests, no prints, no example usage.`

const exampleModel = "```python\n" + `import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b
` + "```"

const exampleNew = "```python\n" + `import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_source = r"""
#include <torch/extension.h>

torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    a = a.contiguous();
    b = b.contiguous();
    auto out = torch::empty_like(a);
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t n = a.numel();
    for (int64_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i];
    return out;
}
"""

_ext = load_inline(name="elementwise_add", cpp_sources=_source, functions=["add"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return _ext.add(a, b)
` + "```"

// fewShot shows fusion: several elementwise operations in one pass.
const fewShot = "Another example, fusing operators into one pass over memory:\n\n```python\n" + `import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))
` + "```\n\nbecomes\n\n```python\n" + `import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor gelu(torch::Tensor x) {
    x = x.contiguous();
    auto out = torch::empty_like(x);
    const float* px = x.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        const float v = px[i];
        po[i] = 0.5f * v * (1.f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
    return out;
}
"""

_ext = load_inline(name="fused_gelu", cpp_sources=_source, functions=["gelu"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.gelu(x)
` + "```"

// Prompt builds the conversation for a task.
func (*Backend) Prompt(_ context.Context, req sdk.PromptRequest) ([]sdk.Message, error) {
	if strings.TrimSpace(req.Task.Source) == "" {
		return nil, fmt.Errorf("%w: the task has no source", sdk.ErrInvalidArgument)
	}
	var b strings.Builder
	b.WriteString(instructions)
	b.WriteString("\n\nHere is an example architecture:\n\n")
	b.WriteString(exampleModel)
	b.WriteString("\n\nwith custom C++ it becomes:\n\n")
	b.WriteString(exampleNew)
	switch req.Variant {
	case "", sdk.VariantOneShot:
	case sdk.VariantFewShot:
		b.WriteString("\n\n")
		b.WriteString(fewShot)
	case sdk.VariantHardwareAware:
		if req.Hardware != nil {
			b.WriteString("\n\nThe kernel runs on this hardware:\n")
			for _, d := range req.Hardware.Devices {
				if d.Kind == "cpu" {
					fmt.Fprintf(&b, "- CPU: %s\n", d.Model)
				}
			}
			if n, ok := req.Hardware.Fingerprint["cpu_count"]; ok {
				fmt.Fprintf(&b, "- %v logical cores; the evaluation pins torch to %v thread(s)\n", n, orDash(req.Hardware.Fingerprint["cpu_threads"]))
			}
			b.WriteString("Use the cache hierarchy well (blocking, contiguous access) and let the compiler vectorise inner loops.\n")
		}
	default:
		return nil, fmt.Errorf("%w: prompt variant %q (known: one-shot, few-shot, hardware-aware)", sdk.ErrInvalidArgument, req.Variant)
	}
	fmt.Fprintf(&b, "\n\nYou are given the following architecture (task %s):\n\n```python\n%s```\n", req.Task.ID, ensureNewline(req.Task.Source))
	if req.Feedback != "" {
		b.WriteString("\n")
		b.WriteString(req.Feedback)
		b.WriteString("\n")
	}
	b.WriteString("\nOptimize the architecture with custom C++ operators. Name it ModelNew and output the complete file in one code block.")
	msgs := []sdk.Message{{Role: "system", Content: system}}
	msgs = append(msgs, req.History...)
	msgs = append(msgs, sdk.Message{Role: "user", Content: b.String()})
	return msgs, nil
}

func orDash(v any) any {
	if v == nil {
		return "-"
	}
	return v
}

func ensureNewline(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

var fence = regexp.MustCompile("(?s)```([a-zA-Z0-9_+-]*)[ \t]*\n(.*?)```")

// Extract returns the code block that defines ModelNew (the last one when there are several).
func Extract(text string) (string, error) {
	var best string
	for _, m := range fence.FindAllStringSubmatch(text, -1) {
		lang := strings.ToLower(m[1])
		if lang != "" && lang != "python" && lang != "py" {
			continue
		}
		if strings.Contains(m[2], "class ModelNew") {
			best = m[2]
		}
	}
	if best == "" && strings.Contains(text, "class ModelNew") && !strings.Contains(text, "```") {
		best = text // a bare file
	}
	if strings.TrimSpace(best) == "" {
		return "", fmt.Errorf("%w: no Python code block defining ModelNew", sdk.ErrNoCode)
	}
	return best, nil
}

// Extract implements sdk.Backend.
func (*Backend) Extract(_ context.Context, text string) (string, error) { return Extract(text) }

var (
	reModelNew = regexp.MustCompile(`(?m)^class\s+ModelNew\s*\(`)
	reInline   = regexp.MustCompile(`load_inline\s*\(`)
	reCUDA     = regexp.MustCompile(`cuda_sources\s*=|__global__|<<<`)
	reStream   = regexp.MustCompile(`torch\.cuda\.Stream|cudaStreamCreate`)
	reExit     = regexp.MustCompile(`os\._exit|sys\.exit`)
	rePatch    = regexp.MustCompile(`(?m)^\s*(torch\.(allclose|equal|testing)|time\.(perf_counter|time|monotonic)\w*)\s*=`)
	reDataPtr  = regexp.MustCompile(`data_ptr\(\)\s*[\],)]`)
	reThread   = regexp.MustCompile(`threading\.Thread|std::thread`)
)

// Check runs static checks: errors for what cannot work on this backend, warnings for patterns the
// contract will likely reject.
func (*Backend) Check(_ context.Context, source string, _ sdk.Task) ([]sdk.Issue, error) {
	var out []sdk.Issue
	add := func(sev, code, msg string) { out = append(out, sdk.Issue{Severity: sev, Code: code, Message: msg}) }
	if !reModelNew.MatchString(source) {
		add(sdk.SeverityError, "no-modelnew", "the file does not define class ModelNew at top level")
	}
	if reCUDA.MatchString(source) {
		add(sdk.SeverityError, "cuda-in-cpp", "CUDA code in a C++ (CPU) candidate")
	}
	if !reInline.MatchString(source) {
		add(sdk.SeverityWarning, "no-custom-kernel", "no load_inline call: the candidate runs PyTorch operators only")
	}
	if reStream.MatchString(source) {
		add(sdk.SeverityWarning, "streams", "creates CUDA streams")
	}
	if reExit.MatchString(source) {
		add(sdk.SeverityWarning, "exit", "calls os._exit or sys.exit")
	}
	if rePatch.MatchString(source) {
		add(sdk.SeverityWarning, "patches-harness", "assigns to torch comparison or time functions")
	}
	if reDataPtr.MatchString(source) {
		add(sdk.SeverityWarning, "pointer-key", "uses data_ptr() as a value (a cache keyed on addresses?)")
	}
	if reThread.MatchString(source) {
		add(sdk.SeverityWarning, "threads", "starts threads")
	}
	return out, nil
}

// Recipe gives the build flags.
func (*Backend) Recipe(_ context.Context, _ *sdk.Hardware) (*sdk.BuildRecipe, error) {
	return &sdk.BuildRecipe{Env: map[string]string{"MAX_JOBS": "2"}}, nil
}
