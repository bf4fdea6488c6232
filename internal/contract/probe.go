package contract

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
)

// SignProbes are the distributions probed on every task's reference (kbpworker/inputs.py's
// SIGN_PROBES). KernelBench draws every input with torch.rand, in [0, 1), and its tasks are
// evaluated under default and scaled, which keep signs: on such inputs ReLU is the identity, and
// so is every operation that differs only on negative inputs or beyond [0, 1) (LeakyReLU,
// HardTanh, clamps, abs, mins). A kernel that forgets the operation passed every trial. Each
// probed distribution the reference handles (it does not raise, its output stays finite, and the
// output differs from the one on the task's own inputs) adds one trial to every evaluation.
var SignProbes = []string{"negated", "uniform", "small"}

// probeMeaning says what each probed distribution does to the inputs, for messages.
var probeMeaning = map[string]string{
	"negated": "every floating input's sign flipped",
	"uniform": "floating inputs drawn from [-1, 1)",
	"small":   "floating inputs a hundred times smaller",
}

// probeTrialReason is the Added of a trial under a probed distribution.
func probeTrialReason(dist string) string {
	return fmt.Sprintf("probed on every task: under %s inputs (%s) the reference stays finite and its output changes, so a kernel that handles only the task's own inputs' signs and magnitudes fails here", dist, probeMeaning[dist])
}

// probed returns what the task's reference does under each of SignProbes on device, asking the
// evaluation's reference process the first time (the answer is kept for the evaluator's life: it
// depends on the task and the device, not on the kernel). It returns false when the reference
// failed and the evaluation has its verdict.
func (r *evalRun) probed() ([]sdk.ProbedDistribution, bool) {
	key := r.task.Hash + "\x00" + r.res.Device
	r.e.mu.Lock()
	got, ok := r.e.probes[key]
	r.e.mu.Unlock()
	if ok {
		return got, true
	}
	req := probeRequest{Distributions: SignProbes, Seed: int(r.rng.Int64N(1 << 30)), Tolerance: r.task.Tolerance}
	var rep probeReply
	var err error
	r.e.progress("probing the reference under %s inputs", strings.Join(SignProbes, ", "))
	solo(r.cand, func() { rep, err = call(r.ctx, r.ref.p, r.e.opt.Config.CallTimeout, req) })
	if err != nil {
		r.refFail("probe", err)
		return nil, false
	}
	r.phases.GPUWork += rep.RefCallMS / 1e3
	got = probeOutcomes(rep.Probes)
	if slices.ContainsFunc(rep.Probes, func(p probeEntry) bool { return p.Error != "" }) {
		// A reference that raised may have left its process unusable (a CUDA error is sticky):
		// it serves no later evaluation.
		r.e.mu.Lock()
		r.ref.dirty = true
		r.e.mu.Unlock()
	}
	r.e.mu.Lock()
	r.e.probes[key] = got
	r.e.mu.Unlock()
	return got, true
}

// probeOutcomes turns the reference's report into kept and refused distributions, with reasons.
func probeOutcomes(entries []probeEntry) []sdk.ProbedDistribution {
	var out []sdk.ProbedDistribution
	for _, p := range entries {
		o := sdk.ProbedDistribution{Dist: p.Dist}
		switch {
		case p.Error != "":
			o.Reason = "the reference raised " + p.Error
		case !p.Finite:
			o.Reason = "the reference's output is not finite"
		case !p.Changes:
			o.Reason = "the reference's output is the same as on the task's own inputs (no floating input, or one whose values do not matter)"
		default:
			o.Kept = true
		}
		out = append(out, o)
	}
	return out
}

// probeTrials adds one trial under each kept probed distribution the task does not already draw
// from. It returns false when the evaluation has its verdict (a trial failed, or a process did).
func (r *evalRun) probeTrials() bool {
	probes, ok := r.probed()
	if !ok {
		return false
	}
	for _, p := range probes {
		if !p.Kept || slices.Contains(r.task.Distributions, p.Dist) {
			continue
		}
		t0 := time.Now()
		n := len(r.res.Trials) + 1
		r.e.progress("correctness trial %d (%s, probed on every task)", n, p.Dist)
		tr := Trial{Seed: int(r.rng.Int64N(1 << 30)), Dist: p.Dist, OK: true, Added: probeTrialReason(p.Dist)}
		c, ok := r.trialCall(&tr, fmt.Sprintf("t%dr0", n), false, false)
		if !ok {
			return false
		}
		r.applyTrial(&tr, []compareReply{c}, "correctness", 0)
		if !tr.OK && r.res.Mismatch != nil {
			r.res.Mismatch.Message = fmt.Sprintf("under %s inputs (%s), in a trial the contract adds to every task whose reference handles them: %s", p.Dist, probeMeaning[p.Dist], r.res.Mismatch.Message)
		}
		r.res.Trials = append(r.res.Trials, tr)
		r.phases.Trials = append(r.phases.Trials, time.Since(t0).Seconds())
		if !tr.OK {
			return false
		}
	}
	return true
}
