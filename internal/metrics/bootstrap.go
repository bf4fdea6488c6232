package metrics

import (
	"math"
	"math/rand/v2"
	"sort"
)

// Interval is a confidence interval.
type Interval struct {
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
}

// Bootstrap is a percentile bootstrap interval of stat over the judged units: resamples units
// with replacement rounds times and takes the (1−level)/2 and (1+level)/2 quantiles. The
// generator is seeded, so the same rows always give the same interval (reports are diffable).
func Bootstrap(units []*Unit, stat func([]*Unit) float64, rounds int, level float64, seed uint64) Interval {
	var judged []*Unit
	for _, u := range units {
		if u.Judged() {
			judged = append(judged, u)
		}
	}
	if len(judged) == 0 || rounds <= 0 {
		return Interval{}
	}
	rng := rand.New(rand.NewPCG(seed, 0x6b62706c6174666d))
	vals := make([]float64, 0, rounds)
	sample := make([]*Unit, len(judged))
	for range rounds {
		for j := range sample {
			sample[j] = judged[rng.IntN(len(judged))]
		}
		// A resample where the statistic is undefined (no correct unit for a mean) says nothing.
		if v := stat(sample); !math.IsNaN(v) {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return Interval{}
	}
	sort.Float64s(vals)
	q := func(f float64) float64 {
		pos := f * float64(len(vals)-1)
		lo := int(pos)
		hi := min(lo+1, len(vals)-1)
		frac := pos - float64(lo)
		return vals[lo]*(1-frac) + vals[hi]*frac
	}
	return Interval{Lo: q((1 - level) / 2), Hi: q((1 + level) / 2)}
}

// FastPCI is a 95% bootstrap interval of fast_p (1000 rounds).
func FastPCI(units []*Unit, p float64, o Options) Interval {
	return Bootstrap(units, func(s []*Unit) float64 { return FastP(s, p, o).Value }, 1000, 0.95, 1)
}

// GeoMeanCI is a 95% bootstrap interval of the geometric mean speedup (1000 rounds).
func GeoMeanCI(units []*Unit, o Options) Interval {
	return Bootstrap(units, func(s []*Unit) float64 {
		m, n := GeoMean(s, o)
		if n == 0 {
			return math.NaN()
		}
		return m
	}, 1000, 0.95, 1)
}
