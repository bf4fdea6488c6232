package contract

import (
	"context"
	"strings"
	"testing"
)

// TestHarnessClaimIsTheKernels: a kernel that raises the worker's own HarnessError, in forward or
// at import, fails as the kernel's runtime_error or load_error (never an `error` verdict blamed on
// the platform, which fast_p would leave out), and the message says why.
func TestHarnessClaimIsTheKernels(t *testing.T) {
	e := newEvaluator(t, nil)
	task := loadTask(t, "scale_relu")
	for _, c := range []struct{ kernel, class string }{
		{"raise_harness_error", ClassRuntime},
		{"raise_harness_error_load", ClassLoad},
	} {
		res := e.Evaluate(context.Background(), task, loadKernel(t, c.kernel), "cpu", nil)
		if res.Verdict != Fail || res.ErrorClass != c.class {
			t.Errorf("%s: %s %s (%s): %s", c.kernel, res.Verdict, res.ErrorClass, res.Phase, res.Message)
			continue
		}
		if !strings.Contains(res.Message, "counted as the kernel's") {
			t.Errorf("%s: message %q does not say why", c.kernel, res.Message)
		}
	}
	// An honest kernel after them still passes: nothing of the harness was broken.
	if res := e.Evaluate(context.Background(), task, loadKernel(t, "honest_torch"), "cpu", nil); res.Verdict != Pass {
		t.Fatalf("honest after: %s %s: %s", res.Verdict, res.ErrorClass, res.Message)
	}
}
