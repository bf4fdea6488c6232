package contract

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// loaded builds a series whose calls take work ms of reported time plus a channel round trip of
// base ms, with scheduling delays of up to spike ms added to a fraction of the calls, the way a
// loaded machine delays a process that waits on a pipe.
func loaded(rng *rand.Rand, n int, work, hidden, base, spike, frac float64) timedSeries {
	var ts timedSeries
	for i := 0; i < n; i++ {
		delay := 0.0
		if rng.Float64() < frac {
			delay = spike * rng.Float64()
		}
		ts.dev = append(ts.dev, work*(0.9+0.2*rng.Float64()))
		ts.wall = append(ts.wall, ts.dev[i]+hidden+base*(1+0.3*rng.Float64())+delay)
	}
	return ts
}

func TestWallCheckHonestUnderLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 500; trial++ {
		// Most calls delayed by up to 3 ms: the medians say "forged", the minima must not.
		// A single series can then look forged now and then; the evaluator confirms with a
		// second series and judges both together, as here.
		calls := loaded(rng, 20, 0.1, 0, 0.08, 3, 0.8)
		noop := loaded(rng, 10, 0.002, 0, 0.08, 3, 0.8)
		if _, forged := wallCheck(calls, noop); forged {
			calls = calls.extend(loaded(rng, 20, 0.1, 0, 0.08, 3, 0.8), len(calls.dev))
			noop = noop.extend(loaded(rng, 10, 0.002, 0, 0.08, 3, 0.8), len(noop.dev))
			if msg, forged := wallCheck(calls, noop); forged {
				t.Fatalf("trial %d: honest calls judged forged after confirmation: %s", trial, msg)
			}
		}
	}
}

func TestWallCheckCatchesForgery(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 500; trial++ {
		// Reports 0.03 ms for calls that really take 3 ms, on a quiet and on a loaded machine.
		for _, frac := range []float64{0, 0.8} {
			calls := loaded(rng, 20, 0.03, 2.97, 0.08, 3, frac)
			noop := loaded(rng, 10, 0.002, 0, 0.08, 3, frac)
			msg, forged := wallCheck(calls, noop)
			if forged {
				msg, forged = wallCheck(calls.extend(loaded(rng, 20, 0.03, 2.97, 0.08, 3, frac), len(calls.dev)),
					noop.extend(loaded(rng, 10, 0.002, 0, 0.08, 3, frac), len(noop.dev)))
			}
			if !forged || !strings.Contains(msg, "timing forged") {
				t.Fatalf("trial %d (load %.1f): forgery missed: %q", trial, frac, msg)
			}
		}
	}
}

func TestWallCheckEdges(t *testing.T) {
	if msg, forged := wallCheck(timedSeries{}, timedSeries{}); forged || msg != "" {
		t.Fatalf("empty series: %q %v", msg, forged)
	}
	// Calls that hide less than the reported time are not called forged (at most a warning).
	calls := timedSeries{dev: []float64{1, 1, 1}, wall: []float64{1.6, 1.6, 1.6}}
	noop := timedSeries{dev: []float64{0, 0}, wall: []float64{0.1, 0.1}}
	if _, forged := wallCheck(calls, noop); forged {
		t.Fatal("0.5 ms unexplained of a 1 ms call judged forged")
	}
	// A device time above the driver's own bracket is reported.
	calls = timedSeries{dev: []float64{2, 2, 2}, wall: []float64{1.1, 1.1, 1.1}}
	if msg, forged := wallCheck(calls, noop); forged || !strings.Contains(msg, "exceeds") {
		t.Fatalf("device time above wall: %q %v", msg, forged)
	}
}

func TestThreadCheck(t *testing.T) {
	if msg, bad := threadCheck(nil, 20); bad || msg != "" {
		t.Fatalf("no threads: %q %v", msg, bad)
	}
	if msg, bad := threadCheck([]int{7}, 20); bad || !strings.Contains(msg, "timed call 7") {
		t.Fatalf("one call (a pool growing late) is a warning: %q %v", msg, bad)
	}
	if msg, bad := threadCheck([]int{3, 4}, 5); !bad || !strings.Contains(msg, "2 of 5") {
		t.Fatalf("two calls: %q %v", msg, bad)
	}
}

// The two sides alternate call by call: a side's series are joined with their calls' indices.
func TestTimedSeriesExtend(t *testing.T) {
	var ts timedSeries
	ts = ts.extend(timedSeries{dev: []float64{1, 2}, threaded: []int{1}}, 0)
	ts = ts.extend(timedSeries{dev: []float64{3}, threaded: []int{0}}, 2)
	if !slices.Equal(ts.dev, []float64{1, 2, 3}) || !slices.Equal(ts.threaded, []int{1, 2}) {
		t.Fatalf("extend: %+v", ts)
	}
}
