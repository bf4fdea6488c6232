package cli

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/examples/kernels"
	"github.com/kbplatform/kbplatform/internal/registry"
	"github.com/kbplatform/kbplatform/plugins/backends/cpp"
	"github.com/kbplatform/kbplatform/plugins/backends/cuda"
	"github.com/kbplatform/kbplatform/plugins/backends/cutlass"
	"github.com/kbplatform/kbplatform/plugins/backends/triton"
	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/tasks"
)

// Every bundled example kernel is honest: its own backend's rules neither reject nor flag it,
// and eval's guess of its language names the backend it was written for.
func TestBundledExamplesPassTheirBackendsRules(t *testing.T) {
	if os.Getenv("KBP_PYTHON") == "" {
		t.Setenv("KBP_PYTHON", "/usr/bin/python3")
	}
	suite, err := registry.LoadSuite(tasks.FS)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.NewRegistry(suite)
	entries, err := kernels.Load()
	if err != nil {
		t.Fatal(err)
	}
	backends := map[string]sdk.Backend{"cpp": cpp.New(), "cuda": cuda.New(), "triton": triton.New(), "cutlass": cutlass.New()}
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			if got := guessBackend(e.Source); got != e.Backend {
				t.Errorf("guessBackend = %s, want %s", got, e.Backend)
			}
			task, err := reg.Get(e.Task)
			if err != nil {
				t.Fatal(err)
			}
			ct, err := task.Contract(task.PickSize("", "cpu"))
			if err != nil {
				t.Fatal(err)
			}
			issues, err := backends[e.Backend].Check(context.Background(), e.Source, ct)
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range issues {
				if i.Severity == sdk.SeverityError || i.Flag != "" {
					t.Errorf("%s %s (flag %q): %s", i.Severity, i.Code, i.Flag, i.Message)
				}
			}
		})
	}
}

// The flagged kernels carry, from the static rules, only flags they were written for; the one
// that calls torch.relu in plain sight gets torch_delegation there (the others only at run time).
func TestFlaggedKernelsStaticFlags(t *testing.T) {
	if os.Getenv("KBP_PYTHON") == "" {
		t.Setenv("KBP_PYTHON", "/usr/bin/python3")
	}
	suite, err := registry.LoadSuite(tasks.FS)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.NewRegistry(suite)
	entries, err := kernels.LoadFlagged()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("no flagged kernels")
	}
	backends := map[string]sdk.Backend{"cpp": cpp.New(), "cuda": cuda.New(), "triton": triton.New(), "cutlass": cutlass.New()}
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			if got := guessBackend(e.Source); got != e.Backend {
				t.Errorf("guessBackend = %s, want %s", got, e.Backend)
			}
			if len(e.Want) == 0 {
				t.Fatal("a flagged kernel names no flag it is written for")
			}
			task, err := reg.Get(e.Task)
			if err != nil {
				t.Fatal(err)
			}
			ct, err := task.Contract(task.PickSize("", "cpu"))
			if err != nil {
				t.Fatal(err)
			}
			issues, err := backends[e.Backend].Check(context.Background(), e.Source, ct)
			if err != nil {
				t.Fatal(err)
			}
			var static []string
			for _, i := range issues {
				if i.Severity == sdk.SeverityError {
					t.Errorf("rejected: %s %s", i.Code, i.Message)
				}
				if i.Flag != "" {
					static = append(static, i.Flag)
					if !slices.Contains(e.Want, i.Flag) {
						t.Errorf("static flag %s (%s) is not one it was written for", i.Flag, i.Message)
					}
				}
			}
			if strings.HasSuffix(e.File, "relu_cuda_delegates.py") && !slices.Contains(static, sdk.FlagTorchDelegation) {
				t.Errorf("torch.relu in forward is not flagged statically: %+v", issues)
			}
		})
	}
}

func TestGuessBackend(t *testing.T) {
	cases := []struct{ src, want string }{
		{"@triton.jit\ndef k(): pass\nclass ModelNew: pass", "triton"},
		{"src = '#include <cute/tensor.hpp>'\nload_inline(cuda_sources=src)", "cutlass"},
		{"load_inline(name='x', cpp_sources=a, cuda_sources=b)", "cuda"},
		{"load_inline(name='x', cpp_sources=a)", "cpp"},
		{strings.Repeat("x = 1\n", 3), "cpp"},
	}
	for _, c := range cases {
		if got := guessBackend(c.src); got != c.want {
			t.Errorf("guessBackend(%q) = %s, want %s", c.src, got, c.want)
		}
	}
}
