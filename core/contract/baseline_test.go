package contract

import (
	"context"
	"strings"
	"testing"
)

// TestBaselines runs the task's own Model through the contract: eager is an A/A measurement that
// builds nothing, and a torch.compile mode either passes with its compile time reported apart or,
// on a torch without torch.compile, is a harness error (no verdict about anything).
func TestBaselines(t *testing.T) {
	py := testPython(t)
	e := newEvaluator(t, func(c *Config) { c.Seeds = 1 })
	task := loadTask(t, "scale_relu")

	eager := e.Baseline(context.Background(), task, "cpu", "eager")
	if eager.Verdict != Pass {
		t.Fatalf("eager baseline: %s %s: %s\n%s", eager.Verdict, eager.ErrorClass, eager.Message, eager.Log)
	}
	if eager.Timing == nil || eager.Timing.Candidate.Median <= 0 || eager.Timing.Reference.Median <= 0 {
		t.Fatalf("eager baseline has no timings: %+v", eager.Timing)
	}
	if eager.Compile == nil || !eager.Compile.OK || eager.Compile.Builds != 0 || eager.Compile.Duration != 0 {
		t.Errorf("eager baseline went through a compile phase: %+v", eager.Compile)
	}
	if eager.ModelCompileS != 0 {
		t.Errorf("eager baseline reports %.2f s of torch.compile", eager.ModelCompileS)
	}
	if len(eager.Tampered) > 0 {
		t.Errorf("the task's own Model was judged tampering: %v", eager.Tampered)
	}

	compiled := e.Baseline(context.Background(), task, "cpu", "compile-default")
	if !py.TorchCompile {
		if compiled.Verdict != VerdictError || compiled.ErrorClass != ClassHarness || !strings.Contains(compiled.Message, "torch.compile") {
			t.Fatalf("compile baseline without torch.compile: %s %s: %s", compiled.Verdict, compiled.ErrorClass, compiled.Message)
		}
		return
	}
	if compiled.Verdict != Pass {
		t.Fatalf("compile-default baseline: %s %s: %s (tampered: %v)\n%s", compiled.Verdict, compiled.ErrorClass, compiled.Message, compiled.Tampered, compiled.Log)
	}
	if compiled.ModelCompileS <= 0 {
		t.Errorf("compile-default baseline reports no compile time")
	}
}
