package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

// A kernel that only calls the PyTorch operator it was asked to replace passes, flagged; one that
// patches the harness's clock is rejected before it is built. Both through eval and through a
// study over two backends, where --exclude-flag takes the flagged pass out of fast_p.
func TestFlagsAndRejectionsThroughEvalAndStudy(t *testing.T) {
	env := isolated(t)
	env["KBP_PYTHON"] = "/usr/bin/python3"
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	relu := write("relu.py", `import torch
import torch.nn as nn

F = torch.nn.functional


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.relu(x)
`)
	softmax := write("softmax.py", `import time

import torch
import torch.nn as nn

time.perf_counter = lambda: 0.0


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)
`)
	contract := []string{"--device", "cpu", "--seeds", "1", "--timed-calls", "10", "--warmup", "1", "--check-calls", "2", "-q"}

	out, errOut, code := run(t, env, append([]string{"eval", "--task", "kbp/l1/relu", "--kernel", relu}, contract...)...)
	if code != 0 || !strings.Contains(out, "verdict   PASS") || !strings.Contains(out, "flag      torch_delegation — torch-delegation: ") {
		t.Fatalf("eval of a delegating kernel: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "static    no-custom-kernel:") {
		t.Errorf("the warning is not shown:\n%s", out)
	}
	if !strings.Contains(out, "flag      no_custom_kernel — runtime: the candidate built no extension") {
		t.Errorf("the runtime flag is not shown:\n%s", out)
	}
	out, errOut, code = run(t, env, append([]string{"eval", "--task", "kbp/l1/softmax", "--kernel", softmax}, contract...)...)
	if code != 3 || !strings.Contains(out, "FAIL — rejected during static") || !strings.Contains(out, "harness-patching: ") {
		t.Fatalf("eval of a patching kernel: exit %d\n%s\n%s", code, out, errOut)
	}

	args := append([]string{"study", "run", "--tasks", "kbp/l1/relu,kbp/l1/softmax", "--model", "replay",
		"--model-config", `{"source":"dir","dir":"` + dir + `"}`, "--backend", "cpp,cuda"}, contract...)
	out, errOut, code = run(t, env, args...)
	if code != 0 {
		t.Fatalf("study: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{`TASK\s+CPP\s+CUDA`, `kbp/l1/relu\s+flagged \d+\.\d+x\s+flagged \d+\.\d+x`, `kbp/l1/softmax\s+incorrect\s+incorrect`,
		`fast_0\s+0\.00, 0\.50 counting flagged\s+0\.00, 0\.50 counting flagged`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("side by side: no %q in\n%s", want, out)
		}
	}
	ids := regexp.MustCompile(`(?m)^(cpp|cuda): study ([0-9a-f]+)$`).FindAllStringSubmatch(out, -1)
	if len(ids) != 2 {
		t.Fatalf("study ids: %q", ids)
	}
	out, _, code = run(t, env, "study", "show", ids[0][2], ids[1][2], "--exclude-flag", "torch_delegation")
	if code != 0 || !regexp.MustCompile(`kbp/l1/relu\s+incorrect\s+incorrect`).MatchString(out) ||
		!regexp.MustCompile(`fast_0\s+0\.00\s+0\.00`).MatchString(out) || !strings.Contains(out, "results flagged torch_delegation are left out") {
		t.Errorf("study show --exclude-flag: exit %d\n%s", code, out)
	}
	// A delegating pass is no solution: fast_0 counts none, and beside it the figure counting it.
	out, _, _ = run(t, env, "study", "show", ids[0][2])
	if !regexp.MustCompile(`fast_0 0\.00, 0\.50 counting flagged`).MatchString(out) {
		t.Errorf("the flagged pass must count only counting flagged:\n%s", out)
	}
}

// eval --flagged runs the kernels written to carry a flag (on the CPU: a C++ extension never
// called, and a sum rounded through fp16) and checks that each passes with exactly its flags.
func TestEvalFlagged(t *testing.T) {
	env := isolated(t)
	env["KBP_PYTHON"] = "/usr/bin/python3"
	out, errOut, code := run(t, env, "eval", "--flagged", "--device", "cpu", "--seeds", "1", "--timed-calls", "10", "--warmup", "1", "--check-calls", "2")
	if code != 0 || !strings.Contains(out, "flags: each of the 2 flagged kernel(s) carries exactly the flags it was written for") {
		t.Fatalf("eval --flagged: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{`relu_cpp_unused\.py .*PASS \[no_custom_kernel\]`, `sum_dim_cpp_half\.py .*PASS \[precision_downcast\]`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

func TestProfileLine(t *testing.T) {
	p := &sdk.Profile{TotalUS: 120.5, Kernels: []sdk.KernelTime{
		{Name: "void relu_kernel<float>(float const*, float*, long)", Share: 0.9, Custom: true},
		{Name: "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)", Share: 0.1},
	}}
	want := "120.5 us: relu_kernel* 90%, at::native::vectorized_elementwise_kernel 10% (* the candidate's own)"
	if got := profileLine(p); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if profileLine(nil) != "" {
		t.Error("no profile, no line")
	}
}
