package search

import "github.com/kbplatform/kbplatform/sdk"

// Tiers of a candidate, best last: how far it got through the contract. A kernel that ran and
// produced wrong values is closer to a correct one than a kernel that crashed, which is closer
// than one that did not build; refinement that goes down a tier has regressed.
const (
	TierNoCode    = iota // no code in the reply
	TierNoVerdict        // not evaluated, or no verdict about the kernel (the platform failed)
	TierBuild            // did not compile, load or pass the static checks; tampering
	TierRun              // built, then failed while running (error, crash, hang)
	TierWrong            // ran to the end with wrong outputs
	TierPass             // correct
)

// Rank places a candidate: its tier, and within the tier a score (higher is better): the
// speedup of a correct kernel, the fraction of right elements of a wrong one.
func Rank(c *Candidate) (tier int, score float64) {
	if c == nil || c.Source == "" {
		return TierNoCode, 0
	}
	r := c.Result()
	if r == nil {
		return TierNoVerdict, 0
	}
	switch r.Verdict {
	case sdk.Pass:
		if r.Timing != nil {
			return TierPass, r.Timing.Speedup
		}
		return TierPass, 0
	case sdk.Fail:
	default:
		return TierNoVerdict, 0
	}
	switch r.ErrorClass {
	case sdk.ClassMismatch, sdk.ClassNondeterm, sdk.ClassInputMutated, sdk.ClassStreamUnordered:
		score := 0.0
		if m := r.Mismatch; m != nil {
			if f, ok := m.Detail["wrong_fraction"].(float64); ok {
				score = 1 - f
			}
		}
		return TierWrong, score
	case sdk.ClassRuntime, sdk.ClassIllegalMemory, sdk.ClassTimeout, sdk.ClassCrash:
		return TierRun, 0
	default:
		return TierBuild, 0
	}
}

// Better reports whether a ranks strictly above b (anything ranks above nil).
func Better(a, b *Candidate) bool {
	if a == nil {
		return false
	}
	if b == nil {
		return true
	}
	ta, sa := Rank(a)
	tb, sb := Rank(b)
	if ta != tb {
		return ta > tb
	}
	return sa > sb
}

// Pick is the best of a turn's candidates, the contract deciding; the earliest among equals.
func Pick(cs []*Candidate) *Candidate {
	var best *Candidate
	for _, c := range cs {
		if best == nil || Better(c, best) {
			best = c
		}
	}
	return best
}
