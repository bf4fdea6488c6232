package contract

import (
	"context"
	"strings"
	"testing"
)

// TestValidateHoldsReferencesToTheTolerance checks what `tasks validate` asks of a reference's
// reproducibility: two calls on one input must agree within the task's tolerance, the rule a
// candidate's two calls are held to. A reference that differs only in its last bits (as cuDNN's
// transposed convolutions do: 32 of KernelBench's level 1-2 tasks on an H100) is usable and gets a
// warning; one that differs beyond the tolerance fails.
func TestValidateHoldsReferencesToTheTolerance(t *testing.T) {
	e := newEvaluator(t, nil)
	v := e.Validate(context.Background(), loadTask(t, "unordered_sum"), "cpu")
	if !v.OK {
		t.Fatalf("a reference reproducible within its tolerance failed validation: %v", v.Errors)
	}
	if w := strings.Join(v.Warnings, "; "); !strings.Contains(w, "last bits") || !strings.Contains(w, "max abs difference") {
		t.Fatalf("warnings %q: want one saying the reference is not bitwise reproducible, and by how much", w)
	}
	v = e.Validate(context.Background(), loadTask(t, "drifting_sum"), "cpu")
	if v.OK || !strings.Contains(strings.Join(v.Errors, "; "), "beyond the task's tolerance") {
		t.Fatalf("a reference that differs between calls beyond its tolerance: ok %v, errors %v", v.OK, v.Errors)
	}
	// A reproducible reference gets neither.
	v = e.Validate(context.Background(), loadTask(t, "scale_relu"), "cpu")
	if !v.OK || strings.Contains(strings.Join(v.Warnings, "; "), "last bits") {
		t.Fatalf("scale_relu: ok %v, errors %v, warnings %v", v.OK, v.Errors, v.Warnings)
	}
}
