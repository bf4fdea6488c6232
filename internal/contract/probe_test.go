package contract

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

// probeTrials are the trials an evaluation added under a probed distribution.
func probeTrials(res *Result) []Trial {
	var out []Trial
	for _, tr := range res.Trials {
		if tr.Added != "" && slices.Contains(SignProbes, tr.Dist) {
			out = append(out, tr)
		}
	}
	return out
}

// TestSignProbes: on a task whose inputs are all in [0, 1) (torch.rand, as KernelBench draws
// them), a compiled ReLU that copies its input passes every trial of the task's own distributions
// and fails the trial the contract adds under negated inputs; an honest ReLU passes all of them,
// one added trial per probed distribution. A task whose reference is not finite under inputs of
// both signs keeps only small, and tasks validate says the task admits only sign-keeping inputs.
func TestSignProbes(t *testing.T) {
	e := newEvaluator(t, nil)
	relu := loadTask(t, "rand_relu")

	res := e.Evaluate(context.Background(), relu, loadKernel(t, "cpp_relu_copy"), "cpu", nil)
	if res.Verdict != Fail || res.ErrorClass != ClassMismatch {
		t.Fatalf("a ReLU without its max: %s %s: %s\n%s", res.Verdict, res.ErrorClass, res.Message, res.Log)
	}
	own := 2 * e.opt.Config.Seeds
	if len(res.Trials) != own+1 {
		t.Fatalf("trials %+v: want the task's own %d, then one added under negated", res.Trials, own)
	}
	for _, tr := range res.Trials[:own] {
		if !tr.OK || tr.Added != "" {
			t.Errorf("the copy failed a trial of the task's own inputs (the task does not test what it should): %+v", tr)
		}
	}
	last := res.Trials[own]
	if last.OK || last.Dist != "negated" || !strings.Contains(last.Added, "probed on every task") {
		t.Errorf("last trial %+v: want a failed probe under negated", last)
	}
	if !strings.Contains(res.Message, "under negated inputs (every floating input's sign flipped), in a trial the contract adds") {
		t.Errorf("message %q: want the probe named", res.Message)
	}
	if res.Timing != nil {
		t.Error("a failed kernel was timed")
	}

	res = e.Evaluate(context.Background(), relu, loadKernel(t, "cpp_relu_honest"), "cpu", nil)
	if res.Verdict != Pass {
		t.Fatalf("an honest ReLU: %s %s: %s\n%s", res.Verdict, res.ErrorClass, res.Message, res.Log)
	}
	var dists []string
	for _, tr := range probeTrials(res) {
		if !tr.OK {
			t.Errorf("honest ReLU failed a probe trial: %+v", tr)
		}
		dists = append(dists, tr.Dist)
	}
	if !slices.Equal(dists, SignProbes) {
		t.Errorf("probe trials under %v, want %v", dists, SignProbes)
	}

	logTask := loadTask(t, "rand_log")
	res = e.Evaluate(context.Background(), logTask, loadKernel(t, "log_torch"), "cpu", nil)
	if res.Verdict != Pass {
		t.Fatalf("an honest log: %s %s: %s\n%s", res.Verdict, res.ErrorClass, res.Message, res.Log)
	}
	dists = nil
	for _, tr := range probeTrials(res) {
		dists = append(dists, tr.Dist)
	}
	if !slices.Equal(dists, []string{"small"}) {
		t.Errorf("log task: probe trials under %v, want only small (its reference is not finite on negative inputs)", dists)
	}

	// tasks validate reports what evaluations do.
	v := e.Validate(context.Background(), relu, "cpu")
	if !v.OK || len(v.Probes) != len(SignProbes) || slices.ContainsFunc(v.Probes, func(p sdk.ProbedDistribution) bool { return !p.Kept }) {
		t.Errorf("validate rand_relu: ok %v, probes %+v: want all kept", v.OK, v.Probes)
	}
	v = e.Validate(context.Background(), logTask, "cpu")
	kept := map[string]string{}
	for _, p := range v.Probes {
		kept[p.Dist] = p.Reason
		if p.Kept {
			kept[p.Dist] = "kept"
		}
	}
	if !v.OK || kept["small"] != "kept" || !strings.Contains(kept["negated"], "not finite") || !strings.Contains(kept["uniform"], "not finite") {
		t.Errorf("validate rand_log: ok %v, probes %+v", v.OK, v.Probes)
	}
	if w := strings.Join(v.Warnings, "; "); !strings.Contains(w, "admit only sign-keeping distributions") {
		t.Errorf("validate rand_log: warnings %q, want the sign-keeping warning", w)
	}
}
