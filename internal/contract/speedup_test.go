package contract

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
)

func TestMedianIntervalRanks(t *testing.T) {
	ranks := func(n int) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = float64(i + 1) // the value is its rank
		}
		return s
	}
	// Ranks from the binomial tables for a 95% interval of the median.
	for _, c := range []struct{ n, lo, hi int }{{6, 1, 6}, {10, 2, 9}, {20, 6, 15}, {100, 40, 61}, {1000, 469, 532}} {
		lo, hi, ok := medianInterval(ranks(c.n))
		if !ok || int(lo) != c.lo || int(hi) != c.hi {
			t.Errorf("n=%d: interval ranks %v-%v (ok %v), want %d-%d", c.n, lo, hi, ok, c.lo, c.hi)
		}
	}
	if _, _, ok := medianInterval(ranks(5)); ok {
		t.Error("n=5: want no 95% interval (both extremes are below the median with probability 2/32)")
	}
}

// The interval covers the true median at least 95% of the time, whatever the distribution.
func TestMedianIntervalCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{6, 20, 100} {
		const reps = 4000
		covered := 0
		for r := 0; r < reps; r++ {
			s := make([]float64, n)
			for i := range s {
				s[i] = rng.ExpFloat64() // skewed; the true median is ln 2
			}
			sort.Float64s(s)
			lo, hi, _ := medianInterval(s)
			if lo <= math.Ln2 && math.Ln2 <= hi {
				covered++
			}
		}
		// Exact coverage is 96.9% (n=6), 95.9% (20), 96.5% (100); 4000 draws put 94.5% 4 standard errors below 95.9%.
		if c := float64(covered) / reps; c < 0.945 {
			t.Errorf("n=%d: covered %.3f of draws, want at least 0.945 (a 95%% interval, less sampling error)", n, c)
		}
	}
}

func TestSpeedupSpreadSynthetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	series := func(n int, f func(i int) (ref, cand float64)) (ref, cand []float64) {
		for i := 0; i < n; i++ {
			r, c := f(i)
			ref = append(ref, r*(1+0.01*rng.NormFloat64()))
			cand = append(cand, c*(1+0.01*rng.NormFloat64()))
		}
		return ref, cand
	}
	cases := []struct {
		name   string
		f      func(i int) (float64, float64)
		want   string // what the reason must say; "" for a resolved timing
		wantSp float64
	}{
		{"steady", func(int) (float64, float64) { return 2, 1 }, "", 2},
		// The device slows both sides by 6% for the second half: the per-call speedups do not move.
		{"shared drift", func(i int) (float64, float64) {
			if i >= 50 {
				return 2.12, 1.06
			}
			return 2, 1
		}, "", 2},
		// One side alone runs 1.4x faster for its last 40 calls.
		{"one side changes", func(i int) (float64, float64) {
			if i >= 60 {
				return 1 / 1.4, 1
			}
			return 1, 1
		}, "moved from", 1},
	}
	for _, c := range cases {
		ref, cand := series(100, c.f)
		tm := &Timing{Speedup: Summarize(ref).Median / Summarize(cand).Median}
		speedupSpread(tm, ref, cand)
		why := unresolved(tm)
		if (why == "") != (c.want == "") || !strings.Contains(why, c.want) {
			t.Errorf("%s: interval %.3f-%.3f halves %v: unresolved %q, want %q", c.name, tm.SpeedupLow, tm.SpeedupHigh, tm.SpeedupHalves, why, c.want)
		}
		if c.want == "" && (tm.SpeedupLow > c.wantSp || tm.SpeedupHigh < c.wantSp) {
			t.Errorf("%s: interval %.3f-%.3f misses the true speedup %.2f", c.name, tm.SpeedupLow, tm.SpeedupHigh, c.wantSp)
		}
	}
}

// Timings measured on an H100: the eager A/A timings whose ratio was far from 1 are unresolved,
// the stable ones (including a batch evaluation whose two sides drifted together) are not.
func TestSpeedupSpreadMeasured(t *testing.T) {
	b, err := os.ReadFile("testdata/timing/h100-2026-12-06.json")
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		Timings []struct {
			Task       string
			Note       string
			Unresolved bool
			Speedup    float64
			Ref        []float64 `json:"reference_ms"`
			Cand       []float64 `json:"candidate_ms"`
		}
	}
	if err := json.Unmarshal(b, &data); err != nil {
		t.Fatal(err)
	}
	if len(data.Timings) == 0 {
		t.Fatal("no timings")
	}
	for _, m := range data.Timings {
		tm := &Timing{Speedup: m.Speedup}
		speedupSpread(tm, m.Ref, m.Cand)
		why := unresolved(tm)
		t.Logf("%s (%s): speedup %.3f, interval %.3f-%.3f, halves %.3f", m.Task, m.Note, m.Speedup, tm.SpeedupLow, tm.SpeedupHigh, tm.SpeedupHalves)
		if (why != "") != m.Unresolved {
			t.Errorf("%s (%s): unresolved %q, want unresolved %v", m.Task, m.Note, why, m.Unresolved)
		}
	}
}
