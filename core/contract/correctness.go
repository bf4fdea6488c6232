package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// correctness runs seeds × distributions trials; it returns false when timing is pointless.
func (r *evalRun) correctness() bool {
	e, cfg := r.e, r.e.opt.Config
	dists := r.task.Distributions
	if len(dists) == 0 {
		dists = []string{"default", "scaled"}
	}
	n := 0
	total := len(dists) * cfg.Seeds
	for _, dist := range dists {
		for s := 0; s < cfg.Seeds; s++ {
			n++
			e.progress("correctness trial %d/%d (%s)", n, total, dist)
			seed := int(r.rng.Int64N(1 << 30))
			repeat := 1
			if s == 0 {
				repeat = 2 // the same input twice: a nondeterminism check once per distribution
			}
			base := filepath.Join(r.dumpDir, fmt.Sprintf("t%d", n))
			dumps := []string{base + "r0", base + "r1"}
			cmd := map[string]any{"op": "trial", "seed": seed, "dist": dist, "repeat": repeat, "dumps": dumps[:repeat]}
			if s == 0 {
				cmd["inputs_dump"] = base + "in"
			}
			resp, err := r.cand.call(r.ctx, cfg.CallTimeout, cmd)
			if err != nil {
				r.tamper(stringList(resp["tampered"]))
				r.candFail("correctness", err)
				return false
			}
			if r.tamper(stringList(resp["tampered"])) {
				return false
			}
			tr := Trial{Seed: seed, Dist: dist, OK: true, Repeated: repeat > 1}
			if mut := intList(resp["mutated"]); len(mut) > 0 {
				tr.InputChanged = mut
			}
			var outputs []json.RawMessage
			_ = json.Unmarshal(resp["outputs"], &outputs)
			if len(outputs) != repeat {
				r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassTampering, "correctness"
				r.res.Message = "the trial reply does not carry the outputs the harness wrote"
				return false
			}
			ccmd := map[string]any{"op": "compare", "seed": seed, "dist": dist, "output": outputs[0], "strides": r.task.Strides}
			if r.task.Tolerance != nil {
				ccmd["tolerance"] = r.task.Tolerance
			}
			if repeat > 1 {
				ccmd["repeat"] = outputs[1]
			}
			if raw, ok := resp["inputs"]; ok {
				ccmd["inputs"] = raw
			}
			for _, m := range append(outputs, resp["inputs"]) {
				if m != nil && !r.manifestInside(m) {
					r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassTampering, "correctness"
					r.res.Message = "an output manifest points outside the evaluation's dump folder"
					return false
				}
			}
			cres, err := r.ref.p.call(r.ctx, cfg.CallTimeout, ccmd)
			r.clearDumps()
			if err != nil {
				var we *workerError
				if errors.As(err, &we) && we.Class == ClassHarness && strings.Contains(we.Message, "TensorFileError") {
					// The candidate's dump was unreadable: not a reference failure.
					r.res.Verdict, r.res.ErrorClass, r.res.Phase, r.res.Message = Fail, ClassTampering, "correctness", "the candidate's output files are not what the harness wrote: "+we.Message
					return false
				}
				r.refFail("compare", err)
				return false
			}
			r.applyCompare(&tr, cres, "correctness", 0)
			r.res.Trials = append(r.res.Trials, tr)
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
	return true
}

type compareReply struct {
	Result struct {
		OK      bool             `json:"ok"`
		Kind    string           `json:"kind"`
		Message string           `json:"message"`
		Leaves  []map[string]any `json:"leaves"`
	} `json:"result"`
	RepeatResult *struct {
		OK      bool   `json:"ok"`
		Message string `json:"message"`
	} `json:"repeat_result"`
	RepeatConsistent *bool  `json:"repeat_consistent"`
	RepeatMessage    string `json:"repeat_message"`
	InputsChanged    []int  `json:"inputs_changed"`
}

func decodeCompare(raw map[string]json.RawMessage) compareReply {
	var c compareReply
	b, _ := json.Marshal(raw)
	_ = json.Unmarshal(b, &c)
	return c
}

// applyCompare folds a comparison reply into the trial and the result's first failure.
func (r *evalRun) applyCompare(tr *Trial, raw map[string]json.RawMessage, phase string, call int) {
	c := decodeCompare(raw)
	if len(c.InputsChanged) > 0 {
		for _, i := range c.InputsChanged {
			if !slices.Contains(tr.InputChanged, i) {
				tr.InputChanged = append(tr.InputChanged, i)
			}
		}
	}
	if c.RepeatConsistent != nil {
		tr.Consistent = c.RepeatConsistent
	}
	if !c.Result.OK {
		tr.OK, tr.Kind, tr.Message = false, c.Result.Kind, c.Result.Message
	} else if c.RepeatResult != nil && !c.RepeatResult.OK {
		tr.OK, tr.Kind, tr.Message = false, "values", "second call on the same input: "+c.RepeatResult.Message
	}
	if !tr.OK && r.res.Mismatch == nil {
		m := &Mismatch{Phase: phase, Seed: tr.Seed, Dist: tr.Dist, Call: call, Kind: tr.Kind, Message: tr.Message}
		for _, leaf := range c.Result.Leaves {
			if ok, _ := leaf["ok"].(bool); !ok {
				m.Detail = leaf
				break
			}
		}
		r.res.Mismatch = m
	}
	if tr.Consistent != nil && !*tr.Consistent {
		w := "two calls on identical inputs gave different results: " + c.RepeatMessage
		if !slices.Contains(r.res.Warnings, w) {
			r.res.Warnings = append(r.res.Warnings, w)
		}
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
