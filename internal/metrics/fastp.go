package metrics

import "math"

// DefaultP is the grid of p a report shows unless told otherwise.
var DefaultP = []float64{0, 0.5, 0.8, 1, 1.5, 2, 3, 4}

// Rate is a fraction of units with its counts.
type Rate struct {
	Value float64 `json:"value"`
	Hits  int     `json:"hits"`
	N     int     `json:"n"` // units in the denominator
	// Missing counts units left out because a correct kernel of theirs has no speedup against
	// the baseline (a torch.compile mode not measured on its hardware).
	Missing int `json:"missing,omitempty"`
	// Short counts units of an @k rate that have fewer than k samples: for them the rate is
	// whether any of their samples succeeded.
	Short int `json:"short,omitempty"`
}

func (r *Rate) finish() {
	if r.N > 0 {
		r.Value = float64(r.Hits) / float64(r.N)
	}
}

// outcome is a unit's fate at p: succeeded, failed, or cannot say (no baseline measured).
type outcome int

const (
	failed outcome = iota
	succeeded
	unmeasured
)

func (u *Unit) at(p float64, maxTurn int, o Options) outcome {
	best, correct, measured := u.Best(o, maxTurn)
	switch {
	case !correct:
		return failed
	case p <= 0 || best > p:
		return succeeded
	case !measured:
		return unmeasured
	}
	return failed
}

// FastP is KernelBench's fast_p: the fraction of units with a correct kernel whose speedup over
// the baseline exceeds p (fast_0 is the correctness rate). Units without a verdict about any
// kernel (the task, the platform or the environment failed) are left out, as in `study show`.
func FastP(units []*Unit, p float64, o Options) Rate {
	return FastPAtTurn(units, p, -1, o)
}

// FastPAtTurn is fast_p@N: fast_p counting only attempts of turns 0..turn (turn < 0: all). The
// denominator is the same at every turn, so the curve over turns never falls.
func FastPAtTurn(units []*Unit, p float64, turn int, o Options) Rate {
	var r Rate
	for _, u := range units {
		if !u.Judged() {
			continue
		}
		switch u.at(p, turn, o) {
		case succeeded:
			r.Hits++
			r.N++
		case failed:
			r.N++
		case unmeasured:
			r.Missing++
		}
	}
	r.finish()
	return r
}

// FastPAtK is fast_p@k, averaged over units: with n judged attempts of which c are correct and
// faster than p, a unit contributes 1 − C(n−c, k)/C(n, k), the chance that k attempts drawn
// without replacement hold a success (the unbiased pass@k estimator). A unit with n < k
// contributes whether any attempt succeeded, and is counted in Short.
func FastPAtK(units []*Unit, p float64, k int, o Options) Rate {
	var r Rate
	var sum float64
	for _, u := range units {
		if !u.Judged() {
			continue
		}
		n, c, missing := 0, 0, 0
		for _, row := range u.Rows {
			if !row.Judged() {
				continue
			}
			if !o.correct(row) {
				n++
				continue
			}
			s, ok := o.speedup(row)
			switch {
			case p <= 0 || (ok && s > p):
				n++
				c++
			case ok:
				n++
			default:
				missing++
			}
		}
		if n == 0 {
			if missing > 0 {
				r.Missing++
			}
			continue
		}
		r.N++
		if n < k {
			r.Short++
			if c > 0 {
				sum++
				r.Hits++
			}
			continue
		}
		v := PassAtK(n, c, k)
		sum += v
		if c > 0 {
			r.Hits++
		}
	}
	if r.N > 0 {
		r.Value = sum / float64(r.N)
	}
	return r
}

// PassAtK is 1 − C(n−c, k)/C(n, k), computed as a product so large n does not overflow.
func PassAtK(n, c, k int) float64 {
	if k <= 0 || n <= 0 {
		return 0
	}
	if n-c < k {
		return 1
	}
	prod := 1.0
	for i := n - c + 1; i <= n; i++ {
		prod *= 1 - float64(k)/float64(i)
	}
	return 1 - prod
}

// GeoMean is the geometric mean of the best speedup of every judged unit with a correct kernel
// (units whose correct kernels have no speedup against the baseline are left out). n is the
// number of units averaged.
func GeoMean(units []*Unit, o Options) (mean float64, n int) {
	var logs float64
	for _, u := range units {
		if !u.Judged() {
			continue
		}
		best, correct, _ := u.Best(o, -1)
		if !correct || best <= 0 {
			continue
		}
		logs += math.Log(best)
		n++
	}
	if n == 0 {
		return 0, 0
	}
	return math.Exp(logs / float64(n)), n
}
