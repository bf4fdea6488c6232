package contract

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// finish decides the verdict from everything gathered, in a fixed order of precedence.
func (r *evalRun) finish() {
	res := r.res
	if len(res.Tampered) > 0 {
		res.Verdict, res.ErrorClass = Fail, ClassTampering
		if res.Phase == "" {
			res.Phase = "guard"
		}
		res.Message = "the candidate replaced harness functions: " + strings.Join(res.Tampered, ", ")
		return
	}
	if res.ErrorClass != "" {
		if res.Verdict == "" {
			res.Verdict = Fail
		}
		return
	}
	var mutated []int
	for _, tr := range res.Trials {
		for _, i := range tr.InputChanged {
			if !slices.Contains(mutated, i) {
				mutated = append(mutated, i)
			}
		}
	}
	if len(mutated) > 0 {
		sort.Ints(mutated)
		res.Verdict, res.ErrorClass, res.Phase = Fail, ClassInputMutated, "correctness"
		res.Message = fmt.Sprintf("the candidate changed its input(s) %v in place", mutated)
		return
	}
	failed, inconsistent := 0, 0
	for _, tr := range res.Trials {
		if !tr.OK {
			failed++
		}
		if tr.Consistent != nil && !*tr.Consistent {
			inconsistent++
		}
	}
	if inconsistent > 0 {
		res.Verdict, res.ErrorClass, res.Phase = Fail, ClassNondeterm, "correctness"
		res.Message = fmt.Sprintf("two calls on identical inputs gave results that differ beyond tolerance (%d of %d checks)", inconsistent, len(res.Trials))
		return
	}
	if failed > 0 {
		res.Verdict, res.ErrorClass, res.Phase = Fail, ClassMismatch, "correctness"
		res.Message = fmt.Sprintf("wrong on %d of %d trials; first: %s", failed, len(res.Trials), res.Mismatch.Message)
		return
	}
	res.Verdict = Pass
}
