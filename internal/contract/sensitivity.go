package contract

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
)

// Some tasks' outputs barely depend on their inputs: a loss averaged over a billion elements, the
// mean of a group-normalised tensor. Under the task's own distributions one fixed output is within
// the tolerance of every trial's reference output, and a "kernel" that returns it without reading
// its inputs passes every trial. After the trials pass, the reference says whether such a
// constant exists for them; when it does, the evaluation adds one trial under the first
// distribution whose output every such constant fails (kbpworker/sensitivity.py), and when none
// does, the result is flagged input_insensitive: its verdict stands, but its correctness says
// nothing beyond the output's value.

// addedTrialReason is the Added of a trial the contract added.
const addedTrialReason = "the task's own distributions barely change its output (one fixed output was within the tolerance of every trial's reference output): a constant output would have passed them"

// sensitive runs the sensitivity check after the task's own trials have all passed and, when
// the reference names a distribution, the added trial. It returns false when the evaluation has
// its verdict (the added trial failed, or a process did).
func (r *evalRun) sensitive() bool {
	req := sensitivityRequest{Seed: int(r.rng.Int64N(1 << 30)), Tolerance: r.task.Tolerance}
	for _, tr := range r.res.Trials {
		req.Trials = append(req.Trials, trialKey{Seed: tr.Seed, Dist: tr.Dist})
	}
	if len(req.Trials) == 0 {
		return true
	}
	t0 := time.Now()
	var rep sensitivityReply
	var err error
	solo(r.cand, func() { rep, err = call(r.ctx, r.ref.p, r.e.opt.Config.CallTimeout, req) })
	if err != nil {
		r.refFail("sensitivity", err)
		return false
	}
	r.phases.GPUWork += rep.RefCallMS / 1e3
	switch {
	case rep.Varies:
		return true
	case rep.Dist == "":
		r.res.AddFlag(Flag{Name: sdk.FlagInputInsensitive, Reason: insensitiveReason(req.Trials, rep.Probed)})
		return true
	}
	n := len(r.res.Trials) + 1
	r.e.progress("correctness trial %d (%s, added: the task's own distributions barely change its output)", n, rep.Dist)
	tr := Trial{Seed: req.Seed, Dist: rep.Dist, OK: true, Added: addedTrialReason}
	c, ok := r.trialCall(&tr, fmt.Sprintf("t%dr0", n), false, false)
	if !ok {
		return false
	}
	r.applyTrial(&tr, []compareReply{c}, "correctness", 0)
	if !tr.OK && r.res.Mismatch != nil {
		r.res.Mismatch.Message = fmt.Sprintf("under %s inputs, in a trial added because the task's own distributions barely change its output: %s", rep.Dist, r.res.Mismatch.Message)
	}
	r.res.Trials = append(r.res.Trials, tr)
	r.phases.Trials = append(r.phases.Trials, time.Since(t0).Seconds())
	return tr.OK
}

// insensitiveReason says which distributions were tried, for the flag.
func insensitiveReason(trials []trialKey, probed []probedDist) string {
	var own []string
	for _, t := range trials {
		if !slices.Contains(own, t.Dist) {
			own = append(own, t.Dist)
		}
	}
	var tried []string
	for _, p := range probed {
		s := p.Dist
		switch {
		case p.Error != "":
			s += " (the reference raised " + p.Error + ")"
		case !p.Finite:
			s += " (non-finite output)"
		}
		tried = append(tried, s)
	}
	return fmt.Sprintf("correctness: one fixed output was within the tolerance of the reference's outputs for every trial under %s, and of its output under every other distribution tried (%s): the trials cannot tell a constant output from a computed one",
		strings.Join(own, ", "), strings.Join(tried, ", "))
}
