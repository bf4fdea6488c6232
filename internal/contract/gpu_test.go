package contract

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
)

// TestGPUContract runs the contract's categories with CUDA candidates on the first GPU. It is
// skipped without one (CI has none); docs/benchmarks.md records its runs on real GPUs.
func TestGPUContract(t *testing.T) {
	e := gpuEvaluator(t, func(c *Config) {
		c.CallTimeout = 20 * time.Second
		c.Seeds = 2
		c.TimedCalls = 30
	})
	small := loadTask(t, "scale_relu")
	big := loadTask(t, "scale_relu_big")
	honest := loadKernel(t, "gpu_honest")
	// after: check that an honest evaluation passes right after (for the cases that kill or hang
	// the candidate's process, where a broken GPU context would show).
	cases := []struct {
		kernel string
		task   Task
		class  string
		after  bool
	}{
		{"gpu_honest", big, "", false},
		{"gpu_side_stream_joined", big, "", false},
		{"gpu_side_stream", big, ClassStreamUnordered, false},
		{"gpu_wrong", big, ClassMismatch, false},
		{"gpu_compile_error", small, ClassCompile, false},
		{"gpu_illegal_address", small, ClassIllegalMemory, true},
		{"gpu_hang", small, ClassTimeout, true},
		{"gpu_inplace", big, ClassInputMutated, false},
		{"gpu_unwritten", big, ClassMismatch, false},
		{"ptr_cache", big, ClassMismatch, false},
		{"count_calls", big, ClassMismatch, false},
		{"patch_allclose", small, ClassTampering, false},
		{"patch_timer", small, ClassTampering, false},
		{"forge_channel", small, ClassTampering, true},
		{"forge_clock", small, ClassTampering, true},
		{"os_exit", small, ClassCrash, true},
		{"background_thread", big, ClassTampering, false},
		{"stealth_timer", small, ClassTampering, false},
	}
	// Build every candidate first, eight at a time, as `kbplatform eval` does with its compile
	// workers: one nvcc build after another would spend most of the run compiling.
	compiled := make([]*CompileResult, len(cases))
	kernels := make([]Kernel, len(cases))
	for i, c := range cases {
		kernels[i] = loadKernel(t, c.kernel)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			compiled[i] = e.Compile(context.Background(), c.task, kernels[i], "cuda:0")
		}()
	}
	wg.Wait()
	var table []string
	medians := map[string]float64{}
	for i, c := range cases {
		t.Run(c.kernel, func(t *testing.T) {
			res := e.Evaluate(context.Background(), c.task, kernels[i], "cuda:0", compiled[i])
			line := fmt.Sprintf("%-20s %-5s %-22s", c.kernel, res.Verdict, res.ErrorClass)
			if res.Timing != nil && res.Verdict == Pass {
				medians[c.kernel] = res.Timing.Candidate.Median
				line += fmt.Sprintf(" cand %.4f ms eager %.4f ms (%.2fx)", res.Timing.Candidate.Median, res.Timing.Reference.Median, res.Timing.Speedup)
			} else {
				line += " " + firstLine(res.Message)
			}
			table = append(table, line)
			t.Log(line)
			if c.class == "" && res.Verdict != Pass {
				t.Fatalf("want pass, got %s %s: %s\n%s", res.Verdict, res.ErrorClass, res.Message, res.Log)
			}
			if c.class != "" && (res.Verdict != Fail || !slices.Contains(strings.Split(c.class, "|"), res.ErrorClass)) {
				t.Fatalf("want fail/%s, got %s/%s: %s\n%s", c.class, res.Verdict, res.ErrorClass, res.Message, res.Log)
			}
			if !c.after {
				return
			}
			after := e.Evaluate(context.Background(), small, honest, "cuda:0", nil)
			if after.Verdict != Pass {
				t.Fatalf("honest evaluation after %s: %s %s: %s", c.kernel, after.Verdict, after.ErrorClass, after.Message)
			}
		})
	}
	// Work on a side stream must be timed, not hidden: the same kernel on the default stream and
	// on a side stream the caller's stream waits for take the same time.
	if h, s := medians["gpu_honest"], medians["gpu_side_stream_joined"]; h > 0 && s < 0.7*h {
		t.Errorf("side-stream kernel timed at %.4f ms against %.4f ms on the default stream", s, h)
	}
	t.Logf("GPU contract results:\n%s", strings.Join(table, "\n"))
}

// gpuEvaluator is newEvaluator on a host with a CUDA device; the test is skipped without one.
func gpuEvaluator(t *testing.T, mutate func(*Config)) *Evaluator {
	t.Helper()
	if !testPython(t).CUDAAvail {
		t.Skip("no CUDA device")
	}
	return newEvaluator(t, mutate)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 100 {
		s = s[:100]
	}
	return s
}

// TestGPURuntimeEvidence checks the runtime flags and the profile on the GPU: honest CUDA and
// Triton kernels carry no flag and their own kernel is in the profile as the candidate's; a CUDA
// candidate that builds a kernel and delegates to PyTorch gets no_custom_kernel; one that rounds
// its results through fp16 gets precision_downcast on a pass. Skipped without a GPU (the lead runs
// it on the H200).
func TestGPURuntimeEvidence(t *testing.T) {
	e := gpuEvaluator(t, func(c *Config) {
		c.CallTimeout = 20 * time.Second
		c.Seeds = 2
		c.TimedCalls = 20
	})
	task := loadTask(t, "scale_relu_big")
	tolerant := task
	tolerant.Tolerance = &Tolerance{Atol: 1e-3, Rtol: 1e-3}
	cases := []struct {
		kernel string
		task   Task
		flags  string // comma-separated, in the order raised
		own    string // a substring of the candidate's own kernel in the profile ("" = none may be)
	}{
		{"gpu_honest", task, "", "scale_relu_kernel"},
		{"triton_honest", task, "", "_scale_relu_kernel"},
		{"gpu_delegates", task, "no_custom_kernel", ""},
		{"gpu_half", tolerant, "precision_downcast", "scale_relu_kernel"},
	}
	for _, c := range cases {
		t.Run(c.kernel, func(t *testing.T) {
			res := e.Evaluate(context.Background(), c.task, loadKernel(t, c.kernel), "cuda:0", nil)
			if res.Verdict != Pass {
				t.Fatalf("want pass, got %s %s: %s\n%s", res.Verdict, res.ErrorClass, res.Message, res.Log)
			}
			var names []string
			for _, f := range res.Flags {
				t.Logf("flag %s: %s", f.Name, f.Reason)
				if !sdk.MeasurementFlag(f.Name) {
					names = append(names, f.Name)
				}
			}
			if got := strings.Join(names, ","); got != c.flags {
				t.Errorf("flags %q, want %q (warnings %q)", got, c.flags, res.Warnings)
			}
			if res.Profile == nil {
				t.Fatalf("no profile (warnings %q)", res.Warnings)
			}
			var own []string
			for _, k := range res.Profile.Kernels {
				t.Logf("%-6v %5.1f%% %8.1f us x%d %s", k.Custom, 100*k.Share, k.TotalUS, k.Calls, k.Name)
				if k.Custom {
					own = append(own, k.Name)
				}
			}
			if c.own == "" && len(own) > 0 || c.own != "" && !slices.ContainsFunc(own, func(n string) bool { return strings.Contains(n, c.own) }) {
				t.Errorf("the candidate's own kernels in the profile: %q, want one named like %q", own, c.own)
			}
		})
	}
}

// TestGPUNeighbours: a program outside kbplatform that runs kernels on the GPU while a kernel is
// timed gets the timing flagged gpu_shared, under its process number. The same evaluation before
// the program starts shows what it did to the timing. Skipped without a GPU.
func TestGPUNeighbours(t *testing.T) {
	e := gpuEvaluator(t, func(c *Config) {
		c.CallTimeout = 20 * time.Second
		c.Seeds = 1
		c.TimedCalls = 30
	})
	task, k := loadTask(t, "scale_relu_big"), loadKernel(t, "gpu_honest")
	alone := e.Evaluate(context.Background(), task, k, "cuda:0", nil)
	if alone.Verdict != Pass {
		t.Fatalf("alone: want pass, got %s %s: %s\n%s", alone.Verdict, alone.ErrorClass, alone.Message, alone.Log)
	}
	for _, w := range alone.Warnings {
		if strings.Contains(w, "PID namespace") || strings.Contains(w, "could not list") {
			t.Fatalf("no neighbour check on this host: %s", w)
		}
	}

	// The stranger: fp32 matmuls, one after another, until it is killed.
	ready := filepath.Join(t.TempDir(), "ready")
	stranger := exec.Command(testPython(t).Path, "-c", `import sys, torch
a = torch.randn(4096, 4096, device="cuda")
(a @ a).sum().item()
open(sys.argv[1], "w").close()
while True:
    a = (a @ a) * 1e-3
    torch.cuda.synchronize()
`, ready)
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stranger.Process.Kill(); _ = stranger.Wait() })
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stranger did not start its loop in 2 minutes")
		}
	}
	shared := e.Evaluate(context.Background(), task, k, "cuda:0", nil)
	if shared.Verdict != Pass {
		t.Fatalf("shared: want pass, got %s %s: %s\n%s", shared.Verdict, shared.ErrorClass, shared.Message, shared.Log)
	}
	reason := shared.FlagReason(sdk.FlagGPUShared)
	t.Logf("flag %s: %s", sdk.FlagGPUShared, reason)
	if !strings.Contains(reason, fmt.Sprintf("pid %d ", stranger.Process.Pid)) {
		t.Errorf("the stranger (pid %d) is not named: flags %v, warnings %q", stranger.Process.Pid, shared.Flags, shared.Warnings)
	}
	t.Logf("alone: cand %.4f ms eager %.4f ms (%.3fx), flags %v; beside the stranger: cand %.4f ms eager %.4f ms (%.3fx)",
		alone.Timing.Candidate.Median, alone.Timing.Reference.Median, alone.Timing.Speedup, alone.Flags,
		shared.Timing.Candidate.Median, shared.Timing.Reference.Median, shared.Timing.Speedup)
}
