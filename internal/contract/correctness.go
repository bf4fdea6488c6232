package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// correctness runs seeds × distributions trials; it returns false when timing is pointless.
func (r *evalRun) correctness() bool {
	e := r.e
	dists := r.task.Distributions
	if len(dists) == 0 {
		dists = []string{"default", "scaled"}
	}
	n := 0
	total := len(dists) * e.opt.Config.Seeds
	for _, dist := range dists {
		for s := 0; s < e.opt.Config.Seeds; s++ {
			n++
			e.progress("correctness trial %d/%d (%s)", n, total, dist)
			t0 := time.Now()
			seed := int(r.rng.Int64N(1 << 30))
			tr := Trial{Seed: seed, Dist: dist, OK: true, Repeated: s == 0}
			// The first trial of each distribution calls the candidate twice on the same input
			// (the nondeterminism check) and has its inputs after the call checked.
			var replies []compareReply
			repeat := 1
			if s == 0 {
				repeat = 2
			}
			for rep := 0; rep < repeat; rep++ {
				c, ok := r.trialCall(&tr, fmt.Sprintf("t%dr%d", n, rep), rep == 0 && s == 0, repeat > 1)
				if !ok {
					return false
				}
				replies = append(replies, c)
			}
			r.applyTrial(&tr, replies, "correctness", 0)
			r.res.Trials = append(r.res.Trials, tr)
			r.phases.Trials = append(r.phases.Trials, time.Since(t0).Seconds())
		}
	}
	if r.res.ErrorClass != "" {
		return false
	}
	for _, tr := range r.res.Trials {
		if !tr.OK || len(tr.InputChanged) > 0 || (tr.Consistent != nil && !*tr.Consistent) {
			return false // incorrect kernels are not timed
		}
	}
	if !r.probeTrials() {
		return false
	}
	return r.sensitive()
}

// trialCall makes one correctness call of the candidate and has the reference compare what it
// returned (and, with checkInputs, its inputs after the call) while the candidate's whole
// process tree is stopped: on a GPU the reference reads the candidate's memory in place. It
// returns false when the evaluation has its verdict.
func (r *evalRun) trialCall(tr *Trial, name string, checkInputs, digest bool) (compareReply, bool) {
	cfg := r.e.opt.Config
	base := filepath.Join(r.dumpDir, name)
	req := trialRequest{Seed: tr.Seed, Dist: tr.Dist, Dump: base}
	if checkInputs {
		req.InputsDump = base + "in"
	}
	rep, err := call(r.ctx, r.cand, cfg.CallTimeout, req)
	if err != nil {
		r.tamper(rep.Tampered)
		r.candFail("correctness", err)
		r.blameCrash(tr.Seed, tr.Dist)
		return compareReply{}, false
	}
	if r.tamper(rep.Tampered) {
		return compareReply{}, false
	}
	for _, m := range rep.Mutated {
		if !slices.Contains(tr.InputChanged, m) {
			tr.InputChanged = append(tr.InputChanged, m)
		}
	}
	r.phases.GPUWork += rep.CallMS / 1e3
	if len(rep.Unordered) > 0 {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassStreamUnordered, "correctness"
		r.res.Message = unorderedMessage(rep.Unordered, tr)
		return compareReply{}, false
	}
	out, ins := rep.Output, rep.Inputs
	if out == nil || (checkInputs && ins == nil) {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassTampering, "correctness"
		r.res.Message = "the trial reply does not carry the outputs the harness wrote"
		return compareReply{}, false
	}
	for _, m := range []json.RawMessage{out, ins} {
		if m != nil && !r.manifestInside(m) {
			r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassTampering, "correctness"
			r.res.Message = "an output manifest points outside the evaluation's dump folder"
			return compareReply{}, false
		}
	}
	return r.compare(tr.Seed, tr.Dist, out, ins, "correctness", digest)
}

// compare has the reference process compare an exported output (and inputs) with its own for
// (seed, dist), the candidate stopped meanwhile; with digest, the reply carries a content hash of
// what it read. It returns false when the evaluation has its verdict.
func (r *evalRun) compare(seed int, dist string, out, ins json.RawMessage, phase string, digest bool) (compareReply, bool) {
	return r.compareWith(compareRequest{Seed: seed, Dist: dist, Output: out, Inputs: ins, Digest: digest}, phase)
}

// compareWith is compare with more of the reference's command filled in by the caller
// (Precision: measure a correct output's precision against a float64 run of the task); the
// task's strides policy and tolerance are added here.
func (r *evalRun) compareWith(req compareRequest, phase string) (compareReply, bool) {
	req.Strides, req.Tolerance = r.task.Strides, r.task.Tolerance
	var c compareReply
	var err error
	solo(r.cand, func() { c, err = call(r.ctx, r.ref.p, r.e.opt.Config.CallTimeout, req) })
	r.clearDumps()
	if err != nil {
		var we *workerError
		if errors.As(err, &we) && we.Class == ClassHarness && strings.Contains(we.Message, "TensorFileError") {
			// The candidate's output files or handles were unreadable: not a reference failure.
			r.res.Verdict, r.res.ErrorClass, r.res.Phase, r.res.Message = Fail, ClassTampering, phase, "the candidate's outputs are not what the harness exported: "+we.Message
			return compareReply{}, false
		}
		r.refFail("compare", err)
		return compareReply{}, false
	}
	r.phases.GPUWork += c.RefCallMS / 1e3
	return c, true
}

// applyTrial folds a trial's comparison replies (two for the nondeterminism check) into the
// trial and the result's first failure. Two calls on one input are consistent when they
// returned the same bytes, or when both are within tolerance of the reference; one right and one
// wrong is nondeterministic.
func (r *evalRun) applyTrial(tr *Trial, cs []compareReply, phase string, call int) {
	for _, c := range cs {
		for _, i := range c.InputsChanged {
			if !slices.Contains(tr.InputChanged, i) {
				tr.InputChanged = append(tr.InputChanged, i)
			}
		}
	}
	first := cs[0]
	if !first.Result.OK {
		tr.OK, tr.Kind, tr.Message = false, first.Result.Kind, first.Result.Message
	} else if len(cs) > 1 && !cs[1].Result.OK {
		tr.OK, tr.Kind, tr.Message = false, "values", "second call on the same input: "+cs[1].Result.Message
	}
	if len(cs) > 1 {
		same := string(cs[0].Digest) == string(cs[1].Digest)
		consistent := same || cs[0].Result.OK == cs[1].Result.OK
		tr.Consistent = &consistent
		var w string
		switch {
		case !consistent:
			w = "two calls on identical inputs gave different results, one within tolerance and one not"
		case !same && cs[0].Result.OK:
			w = "two calls on identical inputs gave bitwise different results (both within tolerance)"
		}
		if w != "" && !slices.Contains(r.res.Warnings, w) {
			r.res.Warnings = append(r.res.Warnings, w)
		}
	}
	if !tr.OK && r.res.Mismatch == nil {
		m := &Mismatch{Phase: phase, Seed: tr.Seed, Dist: tr.Dist, Call: call, Kind: tr.Kind, Message: tr.Message}
		for _, c := range cs {
			for _, leaf := range c.Result.Leaves {
				if ok, _ := leaf["ok"].(bool); !ok {
					m.Detail = leaf
					break
				}
			}
			if m.Detail != nil {
				break
			}
		}
		r.res.Mismatch = m
	}
}

// manifestInside checks that every tensor path of a manifest lies in the dump folder.
func (r *evalRun) manifestInside(raw json.RawMessage) bool {
	var m struct {
		Leaves []struct {
			Tensor *string `json:"tensor"`
		} `json:"leaves"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return false
	}
	prefix := filepath.Clean(r.dumpDir) + string(filepath.Separator)
	for _, l := range m.Leaves {
		if l.Tensor != nil && !strings.HasPrefix(filepath.Clean(*l.Tensor), prefix) {
			return false
		}
	}
	return true
}

func (r *evalRun) clearDumps() {
	entries, _ := os.ReadDir(r.dumpDir)
	for _, en := range entries {
		os.Remove(filepath.Join(r.dumpDir, en.Name()))
	}
}

// unorderedMessage says what a trial found when outputs changed after forward returned.
func unorderedMessage(outputs []int, tr *Trial) string {
	which := make([]string, len(outputs))
	for i, o := range outputs {
		which[i] = fmt.Sprint(o)
	}
	return fmt.Sprintf("output %s was not complete when the caller's CUDA stream reached the end of forward (trial under %s, seed %d): "+
		"read on that stream right after forward returned, its content differed from what the device held once every stream had finished. "+
		"The kernel's work runs on a stream the caller's stream does not wait for; in a model, the next operation on the caller's stream would read it unfinished. "+
		"Make the caller's stream wait for the work (torch.cuda.current_stream().wait_stream(s), or an event recorded on s and waited on), or launch on the current stream",
		strings.Join(which, ", "), tr.Dist, tr.Seed)
}
