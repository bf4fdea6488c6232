package record

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

func TestRecordBlames(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	task := sdk.Task{ID: "kbp/l1/relu", Size: "cpu", Hash: "th", Source: "class Model: ..."}
	kernel := sdk.Kernel{Hash: "kh", Name: "k.py", Source: "class ModelNew: ..."}
	noCUDA := sdk.Fingerprint{"torch_cuda": "", "triton": ""}
	withCUDA := sdk.Fingerprint{"torch_cuda": "12.4", "triton": "3.0"}
	tests := []struct {
		name      string
		res       *sdk.Result
		err       error
		blame     string
		class     string
		interrupt bool
	}{
		{name: "pass", res: &sdk.Result{Verdict: sdk.Pass, Kernel: sdk.Kernel{Hash: "kh"}}, blame: "", class: ""},
		{name: "mismatch is the kernel's", res: &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassMismatch}, blame: BlameKernel, class: sdk.ClassMismatch},
		{name: "target failure", err: errors.New("plugin crashed"), blame: BlamePlatform, class: sdk.ClassPlatform},
		{name: "harness error", res: &sdk.Result{Verdict: sdk.VerdictError, ErrorClass: sdk.ClassHarness, Message: "cannot write"}, blame: BlamePlatform, class: sdk.ClassPlatform},
		{name: "reference error", res: &sdk.Result{Verdict: sdk.VerdictError, ErrorClass: sdk.ClassReference, Message: "ValueError"}, blame: BlameTask, class: sdk.ClassTask},
		{name: "reference out of memory", res: &sdk.Result{Verdict: sdk.VerdictError, ErrorClass: sdk.ClassReference, Message: "CUDA out of memory"}, blame: BlamePlatform, class: sdk.ClassPlatform},
		{name: "the task's get_inputs killed for memory in the reference", res: &sdk.Result{Verdict: sdk.VerdictError, ErrorClass: sdk.ClassReference, Phase: sdk.PhaseTask,
			Message: "the task's get_inputs fails in the clean reference process too: killed by SIGKILL, killed for memory (the kernel's OOM killer: Out of memory: Killed process 42 (python3))"},
			blame: BlameTask, class: sdk.ClassTask},
		{name: "task does not fit", res: &sdk.Result{Verdict: sdk.VerdictError, ErrorClass: sdk.ClassResource, Message: "needs 90 GiB"}, blame: BlamePlatform, class: sdk.ClassResource},
		{name: "no CUDA toolkit", res: &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassCompile, Phase: "compile", Fingerprint: noCUDA,
			Message: "CompileError: CUDA_HOME environment variable is not set"}, blame: BlameEnvironment, class: sdk.ClassEnvironment},
		{name: "the same message where CUDA is present", res: &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassCompile, Phase: "compile", Fingerprint: withCUDA,
			Message: "CompileError: CUDA_HOME environment variable is not set"}, blame: BlameKernel, class: sdk.ClassCompile},
		{name: "no triton", res: &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassLoad, Fingerprint: noCUDA,
			Message: "ModuleNotFoundError: No module named 'triton'"}, blame: BlameEnvironment, class: sdk.ClassEnvironment},
		{name: "no torch.compile", res: &sdk.Result{Verdict: sdk.VerdictError, ErrorClass: sdk.ClassHarness,
			Message: "torch 1.13 has no torch.compile (needs torch >= 2.0)"}, blame: BlameEnvironment, class: sdk.ClassEnvironment},
		{name: "interrupted", res: &sdk.Result{Verdict: sdk.VerdictError, ErrorClass: sdk.ClassInterrupted}, interrupt: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc := &Recorder{Store: st, Target: "target/local"}
			ev, err := rc.Record(context.Background(), Attempt{Task: task, Kernel: kernel, Device: "cpu", Result: tc.res, Err: tc.err})
			if tc.interrupt {
				if !errors.Is(err, ErrInterrupted) {
					t.Fatalf("got %v, want ErrInterrupted", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := ev.Result
			if ev.Blame != tc.blame || r.ErrorClass != tc.class {
				t.Fatalf("blame %q class %q, want %q %q (%v)", ev.Blame, r.ErrorClass, tc.blame, tc.class, r.Warnings)
			}
			if tc.blame != "" && tc.blame != BlameKernel && r.Verdict != sdk.VerdictError {
				t.Errorf("verdict %q for a failure that is not the kernel's", r.Verdict)
			}
			if r.FinishedAt.Year() < 2000 || r.StartedAt.Year() < 2000 {
				t.Errorf("no real timestamp: %v %v", r.StartedAt, r.FinishedAt)
			}
			if ev.Target != "local/cpu" {
				t.Errorf("target named %q, want local/cpu", ev.Target)
			}
			got, err := st.Evaluation(ev.ID)
			if err != nil || got.Blame != tc.blame {
				t.Fatalf("stored: %+v %v", got, err)
			}
			if got.Result.Task.ID != task.ID || !strings.Contains(r.Task.Source, "Model") {
				t.Errorf("task or its source not re-attached: %+v", r.Task)
			}
			if k, err := st.Kernel(r.Kernel.Hash); r.Kernel.Hash != "" && (err != nil || k.Source != kernel.Source) {
				t.Errorf("kernel source not stored: %+v %v", k, err)
			}
		})
	}
}
