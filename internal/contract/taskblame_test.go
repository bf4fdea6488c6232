package contract

import (
	"context"
	"strings"
	"testing"
)

// A task whose own code fails gets no verdict about the kernel: the reference process confirms
// the failure and it is reported as the task's (reference_error in phase task). A candidate that
// claims the task's failure as its own excuse, or crashes on a sound task, is still judged.
func TestTaskBlame(t *testing.T) {
	e := newEvaluator(t, nil)
	cases := []struct {
		task, kernel string
		verdict      string
		class        string
		phase        string
		want         []string // substrings of the message
	}{
		{"unseeded_inputs", "honest_torch", VerdictError, ClassReference, PhaseTask,
			[]string{"not a function of its seed", "input(s) [0]"}},
		{"syntax_error_task", "honest_torch", VerdictError, ClassReference, PhaseTask,
			[]string{"does not parse", "SyntaxError", "line 11", "def forward(self, x)"}},
		{"killed_inputs", "honest_torch", VerdictError, ClassReference, PhaseTask,
			[]string{"fails in the clean reference process too", "killed by SIGKILL", "candidate process killed by SIGKILL"}},
		{"scale_relu", "claims_task_error", Fail, ClassLoad, "compile",
			[]string{"does not confirm"}},
		{"scale_relu", "claims_task_error_in_forward", Fail, ClassRuntime, "correctness", nil},
		{"scale_relu", "sigkill_self", Fail, ClassCrash, "correctness",
			[]string{"killed by SIGKILL"}},
	}
	for _, c := range cases {
		t.Run(c.task+"/"+c.kernel, func(t *testing.T) {
			res := e.Evaluate(context.Background(), loadTask(t, c.task), loadKernel(t, c.kernel), "cpu", nil)
			t.Logf("%s %s/%s: %s", res.Verdict, res.ErrorClass, res.Phase, res.Message)
			if res.Verdict != c.verdict || res.ErrorClass != c.class || res.Phase != c.phase {
				t.Fatalf("got %s/%s/%s, want %s/%s/%s: %s\n%s", res.Verdict, res.ErrorClass, res.Phase, c.verdict, c.class, c.phase, res.Message, res.Log)
			}
			for _, w := range c.want {
				if !strings.Contains(res.Message, w) {
					t.Errorf("message %q does not say %q", res.Message, w)
				}
			}
		})
	}
	// The reference processes the failures killed are replaced: a sound task still passes.
	if res := e.Evaluate(context.Background(), loadTask(t, "scale_relu"), loadKernel(t, "honest_torch"), "cpu", nil); res.Verdict != Pass {
		t.Fatalf("honest after the task failures: %s %s %s\n%s", res.Verdict, res.ErrorClass, res.Message, res.Log)
	}
}

// `tasks validate` names the same causes: inputs that are not a function of the seed, a file
// that does not parse.
func TestValidateNamesTheTasksFault(t *testing.T) {
	e := newEvaluator(t, nil)
	for name, want := range map[string]string{
		"unseeded_inputs":   "not a function of its seed",
		"syntax_error_task": "does not parse",
	} {
		v := e.Validate(context.Background(), loadTask(t, name), "cpu")
		if v.OK || !strings.Contains(strings.Join(v.Errors, "; "), want) {
			t.Errorf("%s: ok %v, errors %q; want a failure that says %q", name, v.OK, v.Errors, want)
		}
	}
}
