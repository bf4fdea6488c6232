package record

import (
	"strings"

	"github.com/kbplatform/kbplatform/sdk"
)

// Who a failed evaluation is on. Only BlameKernel is a verdict about the kernel; the others are
// stored with verdict error and never count against a kernel (fast_p leaves their tasks out).
const (
	BlameKernel      = "kernel"
	BlameTask        = "task"
	BlamePlatform    = "platform"
	BlameEnvironment = "environment"
)

// classOf is the error class each party other than the kernel gets.
var classOf = map[string]string{
	BlameTask:        sdk.ClassTask,
	BlamePlatform:    sdk.ClassPlatform,
	BlameEnvironment: sdk.ClassEnvironment,
}

// BlameOf says who a stored result's failure is on ("" for a pass).
func BlameOf(r *sdk.Result) string {
	switch {
	case r == nil:
		return BlamePlatform
	case r.Verdict == sdk.Pass:
		return ""
	case r.ErrorClass == sdk.ClassTask || r.ErrorClass == sdk.ClassReference:
		return BlameTask
	case r.ErrorClass == sdk.ClassPlatform || r.ErrorClass == sdk.ClassHarness || r.ErrorClass == sdk.ClassResource:
		return BlamePlatform
	case r.ErrorClass == sdk.ClassEnvironment:
		return BlameEnvironment
	case r.Verdict == sdk.VerdictError:
		return BlamePlatform
	}
	return BlameKernel
}

// toolkit is a message that says a kernel language's toolkit is missing, and the fingerprint key
// that must confirm it (empty there: this platform lacks it). The confirmation matters: a kernel
// cannot excuse its own failure by printing the message on a platform that has the toolkit.
type toolkit struct {
	phrases []string
	confirm string
	what    string
}

var toolkits = []toolkit{
	{phrases: []string{"CUDA_HOME environment variable is not set", "No CUDA runtime is found", "Torch not compiled with CUDA enabled",
		"Found no NVIDIA driver", "nvcc: not found", "nvcc: No such file"}, confirm: "torch_cuda", what: "a CUDA toolkit (this torch has no CUDA)"},
	{phrases: []string{"No module named 'triton'"}, confirm: "triton", what: "Triton"},
}

// environmentGap names the toolkit a failure shows missing, when the platform confirms it.
func environmentGap(r *sdk.Result) string {
	if r.ErrorClass == sdk.ClassHarness && strings.Contains(r.Message, "no torch.compile") {
		return "torch.compile (torch >= 2.0)"
	}
	switch r.ErrorClass {
	case sdk.ClassCompile, sdk.ClassLoad, sdk.ClassRuntime:
	default:
		return ""
	}
	text := r.Message + "\n" + r.Traceback
	if r.Compile != nil {
		text += "\n" + r.Compile.Message + "\n" + r.Compile.Log
	}
	for _, tk := range toolkits {
		for _, p := range tk.phrases {
			if !strings.Contains(text, p) {
				continue
			}
			if v, ok := r.Fingerprint[tk.confirm]; ok && (v == nil || v == "" || v == false) {
				return tk.what
			}
		}
	}
	return ""
}

// inputsFailed reports whether the failure arose while the harness made the task's inputs or
// init inputs (its get_inputs or get_init_inputs raised), by the worker's frames in the traceback.
// A suspicion only: the candidate's process wrote it, so the task is validated before it is blamed.
func inputsFailed(r *sdk.Result) bool {
	if r.Verdict != sdk.Fail || r.ErrorClass != sdk.ClassRuntime {
		return false
	}
	return strings.Contains(r.Traceback, "in make_inputs\n") || strings.Contains(r.Traceback, "in make_init_inputs\n")
}

// relabel turns a result into a blamed outcome: verdict error, the party's class, and a warning
// that keeps what the driver said.
func relabel(r *sdk.Result, blame, why string) {
	old := r.ErrorClass
	if old == "" {
		old = r.Verdict
	}
	r.Verdict, r.ErrorClass = sdk.VerdictError, classOf[blame]
	note := "not the kernel's failure: " + why
	if old != r.ErrorClass {
		note += " (the driver reported " + old
		if r.Phase != "" {
			note += " during " + r.Phase
		}
		note += ")"
	}
	r.Warnings = append(r.Warnings, note)
}
