package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kbplatform/kbplatform/internal/store"
)

const reluTask = `import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    %s

def get_init_inputs():
    return []
`

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Failures that are not the kernel's get their own class, exit status 4 and a real timestamp,
// and `eval` and `baseline` exit alike on the same error.
func TestFailuresAreBlamedOnTheRightParty(t *testing.T) {
	env := isolated(t)
	dir := t.TempDir()
	fast := []string{"--seeds", "1", "--timed-calls", "5", "--warmup", "1", "--check-calls", "1", "-q"}
	relu := filepath.Join("..", "..", "examples", "kernels", "relu", "cpp.py")
	brokenTask := writeFile(t, dir, "broken_inputs.py", strings.Replace(reluTask, "%s", `raise ValueError("broken inputs")`, 1))

	t.Run("the task's get_inputs raises", func(t *testing.T) {
		out, errOut, code := run(t, env, append([]string{"eval", "--task", brokenTask, "--kernel", relu, "--device", "cpu", "--json"}, fast...)...)
		if code != exitNoVerdict {
			t.Fatalf("exit %d, want %d\n%s\n%s", code, exitNoVerdict, out, errOut)
		}
		var ev store.Evaluation
		if err := json.Unmarshal([]byte(out), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Blame != "task" || ev.Result.ErrorClass != "task_error" || ev.Result.Verdict != "error" {
			t.Fatalf("blame %q class %q verdict %q, want task task_error error", ev.Blame, ev.Result.ErrorClass, ev.Result.Verdict)
		}
		if ev.Result.FinishedAt.Year() < 2000 {
			t.Errorf("timestamp %v", ev.Result.FinishedAt)
		}
	})
	t.Run("a kernel whose own code raises is still the kernel's", func(t *testing.T) {
		k := writeFile(t, dir, "raises.py", "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        raise ValueError('mine')\n")
		out, _, code := run(t, env, append([]string{"eval", "--task", "kbp/l1/relu", "--kernel", k, "--device", "cpu"}, fast...)...)
		if code != exitKernelFailed || !strings.Contains(out, "FAIL — runtime_error") {
			t.Fatalf("exit %d\n%s", code, out)
		}
	})
	t.Run("a CUDA kernel on a host without CUDA", func(t *testing.T) {
		cuda := filepath.Join("..", "..", "examples", "kernels", "relu", "cuda.py")
		out, errOut, code := run(t, env, append([]string{"eval", "--task", "kbp/l1/relu", "--kernel", cuda, "--device", "cpu"}, fast...)...)
		if code != exitNoVerdict || !strings.Contains(out, "environment_error") || !strings.Contains(out, "the environment's fault") {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
	})
	t.Run("no such device: eval and baseline alike", func(t *testing.T) {
		for _, args := range [][]string{
			{"eval", "--task", "kbp/l1/relu", "--kernel", relu, "--device", "cuda:7"},
			{"baseline", "--task", "kbp/l1/relu", "--modes", "eager", "--device", "cuda:7"},
			{"eval", "--task", "kbp/l1/relu", "--kernel", relu, "--device", "cpu,cuda:7"},
			{"baseline", "--task", "kbp/l1/relu", "--modes", "eager", "--device", "cuda:7,cpu"},
		} {
			_, errOut, code := run(t, env, append(args, fast...)...)
			if code != exitNoVerdict || !strings.Contains(errOut, "no device cuda:7") {
				t.Errorf("%s: exit %d, want %d\n%s", args[0], code, exitNoVerdict, errOut)
			}
		}
	})
	t.Run("the baseline of a broken task", func(t *testing.T) {
		_, errOut, code := run(t, env, append([]string{"baseline", "--task", brokenTask, "--modes", "eager", "--device", "cpu"}, fast...)...)
		if code != exitNoVerdict {
			t.Errorf("exit %d, want %d\n%s", code, exitNoVerdict, errOut)
		}
	})
	list, _, _ := run(t, env, "results", "list")
	if strings.Contains(list, "0001-01-01") {
		t.Errorf("a record without a real time:\n%s", list)
	}
}

// A candidate that prints bytes that are not UTF-8 still gets its verdict: the log crosses the
// plugin boundary with the bad bytes replaced.
func TestInvalidUTF8FromACandidate(t *testing.T) {
	env := isolated(t)
	k := writeFile(t, t.TempDir(), "noisy.py", `import os, torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        os.write(1, b"bad \xff\xfe \xc3 bytes\n")
        os.write(2, b"\xe2\x82")
        return torch.relu(x)
`)
	out, errOut, code := run(t, env, "eval", "--task", "kbp/l1/relu", "--kernel", k, "--device", "cpu", "--seeds", "1",
		"--timed-calls", "5", "--warmup", "1", "--check-calls", "1", "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var ev store.Evaluation
	if err := json.Unmarshal([]byte(out), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Result.Verdict != "pass" || !strings.Contains(ev.Result.Log, "bad \uFFFD") || !utf8.ValidString(ev.Result.Log) {
		t.Fatalf("verdict %q, log %q", ev.Result.Verdict, ev.Result.Log)
	}
}

// The task's own faults are the task's, with their cause on the screen: inputs that are not a
// function of the seed, a file that does not parse, a get_inputs killed where it runs; a kernel
// killed by a signal says which.
func TestTaskFaultsAreTheTasks(t *testing.T) {
	env := isolated(t)
	dir := t.TempDir()
	fast := []string{"--device", "cpu", "--seeds", "1", "--timed-calls", "5", "--warmup", "1", "--check-calls", "1", "-q"}
	relu := filepath.Join("..", "..", "examples", "kernels", "relu", "cpp.py")
	unseeded := writeFile(t, dir, "unseeded.py", strings.Replace(reluTask, "%s",
		"import os\n    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), 'little'))\n    return [torch.randn(64, 64, generator=g)]", 1))
	syntax := writeFile(t, dir, "syntax.py", strings.Replace(strings.Replace(reluTask, "def forward(self, x):", "def forward(self, x)", 1), "%s", "return [torch.randn(64, 64)]", 1))
	killed := writeFile(t, dir, "killed.py", strings.Replace(reluTask, "%s",
		"import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n    return [torch.randn(64, 64)]", 1))
	sigkill := writeFile(t, dir, "sigkill.py", "import os, signal, torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        os.kill(os.getpid(), signal.SIGKILL)\n")
	cases := []struct {
		name, task, kernel string
		code               int
		want               []string
	}{
		{"get_inputs is not seeded", unseeded, relu, exitNoVerdict,
			[]string{"ERROR (no verdict: the task's fault) — task_error", "not a function of its seed"}},
		{"the task file does not parse", syntax, relu, exitNoVerdict,
			[]string{"task_error", "the task file does not parse: SyntaxError", "line 5"}},
		{"get_inputs is killed", killed, relu, exitNoVerdict,
			[]string{"task_error", "killed by SIGKILL"}},
		{"the kernel is killed", "kbp/l1/relu", sigkill, exitKernelFailed,
			[]string{"FAIL — crash", "killed by SIGKILL"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := run(t, env, append([]string{"eval", "--task", c.task, "--kernel", c.kernel}, fast...)...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, c.code, out, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("the screen does not say %q:\n%s", w, out)
				}
			}
		})
	}
	t.Run("tasks validate names the cause", func(t *testing.T) {
		out, errOut, _ := run(t, env, "tasks", "validate", unseeded, syntax, "--device", "cpu")
		for _, w := range []string{"not a function of its seed", "does not parse"} {
			if !strings.Contains(out+errOut, w) {
				t.Errorf("validate does not say %q:\n%s\n%s", w, out, errOut)
			}
		}
	})
}
