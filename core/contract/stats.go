package contract

import (
	"math"
	"sort"
)

// Stats summarises timing samples in milliseconds.
type Stats struct {
	N      int     `json:"n"`
	Median float64 `json:"median_ms"`
	Mean   float64 `json:"mean_ms"`
	Min    float64 `json:"min_ms"`
	Max    float64 `json:"max_ms"`
	Q1     float64 `json:"q1_ms"`
	Q3     float64 `json:"q3_ms"`
	IQR    float64 `json:"iqr_ms"`
	Std    float64 `json:"std_ms"`
	CV     float64 `json:"cv"`
}

// Summarize computes Stats; quantiles interpolate linearly between order statistics.
func Summarize(samples []float64) Stats {
	n := len(samples)
	if n == 0 {
		return Stats{}
	}
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	mean := sum / float64(n)
	var ss float64
	for _, v := range s {
		ss += (v - mean) * (v - mean)
	}
	std := 0.0
	if n > 1 {
		std = math.Sqrt(ss / float64(n-1))
	}
	st := Stats{
		N:      n,
		Median: quantile(s, 0.5),
		Mean:   mean,
		Min:    s[0],
		Max:    s[n-1],
		Q1:     quantile(s, 0.25),
		Q3:     quantile(s, 0.75),
		Std:    std,
	}
	st.IQR = st.Q3 - st.Q1
	if mean > 0 {
		st.CV = std / mean
	}
	return st
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	frac := pos - float64(lo)
	return sorted[lo]*(1-frac) + sorted[hi]*frac
}
