package contract

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
)

// timedSeries is what one run of timed calls (or empty calls) produced.
type timedSeries struct {
	dev, wall []float64 // device and driver-wall samples in ms, one per call
	threaded  []int     // calls that returned while a thread they started was still running
	// kernelClock: the wall samples come from the kernel's send stamps on the clock channel.
	kernelClock bool
}

// solo runs f with other's process group stopped, and lets it run again afterwards.
func solo(other *proc, f func()) {
	other.pause()
	defer other.resume()
	f()
}

// extend appends the series o, whose first call has index offset among the timed calls (the
// two sides alternate, so each side's timed calls come in many short series).
func (ts timedSeries) extend(o timedSeries, offset int) timedSeries {
	ts.dev = slices.Concat(ts.dev, o.dev)
	ts.wall = slices.Concat(ts.wall, o.wall)
	ts.threaded = slices.Clone(ts.threaded)
	for _, i := range o.threaded {
		ts.threaded = append(ts.threaded, offset+i)
	}
	return ts
}

// series times n calls (or empty calls).
func (r *evalRun) series(p *proc, n int, seeds []int, noop bool) (timedSeries, error) {
	cfg := r.e.opt.Config
	var ts timedSeries
	for i := 0; i < n; i++ {
		req := timedRequest{Seed: 0, Dist: "default", Noop: noop}
		if seeds != nil {
			req.Seed = seeds[i]
		}
		rep, err := call(r.ctx, p, cfg.CallTimeout, req)
		if err != nil {
			return ts, err
		}
		armed, finished, err := p.clock.bracket(p.seq)
		if err != nil {
			p.kill()
			return ts, &procError{Class: ClassTampering, Message: err.Error()}
		}
		if finished.at.Before(armed.at) {
			return ts, &procError{Class: ClassTampering, Message: "timed call's end mark precedes its start mark on the clock channel"}
		}
		ts.kernelClock = armed.kernel && finished.kernel
		if rep.DeviceMS == nil || math.IsNaN(*rep.DeviceMS) || *rep.DeviceMS < 0 {
			return ts, &procError{Class: ClassTampering, Message: "timed call reported an invalid device time"}
		}
		ts.dev = append(ts.dev, *rep.DeviceMS)
		ts.wall = append(ts.wall, float64(finished.at.Sub(armed.at).Nanoseconds())/1e6)
		if rep.ThreadsStarted > 0 {
			ts.threaded = append(ts.threaded, i)
		}
	}
	if err := p.clock.quiet(); err != nil {
		p.kill()
		return ts, &procError{Class: ClassTampering, Message: err.Error()}
	}
	return ts, nil
}

// timing times the reference and the candidate the same way, re-checks a few timed outputs the
// candidate cannot predict, and bounds the reported device times by the driver's wall clock.
func (r *evalRun) timing() {
	e, cfg := r.e, r.e.opt.Config
	n := cfg.TimedCalls
	seeds := make([]int, cfg.Warmup+n)
	for i := range seeds {
		seeds[i] = int(r.rng.Int64N(1 << 30))
	}
	check := map[int]bool{}
	for _, i := range r.rng.Perm(n)[:cfg.CheckCalls] {
		check[i] = true
	}
	tm := &Timing{Warmup: cfg.Warmup}
	t0 := time.Now()
	defer func() { r.phases.Timing = time.Since(t0).Seconds() }()

	// Both sides warm up, then their timed calls alternate one by one (reference, candidate,
	// candidate, reference, ...). The device's speed drifts: on the H200, memory-bound kernels run
	// 3-5% slower for stretches of 0.5-3 s, so two series timed one after the other can differ by
	// that much with identical code. Alternating puts both sides in the same stretches.
	// Every timed, empty or warm-up call runs with the other side's process group stopped: nothing
	// the idle process, or a process or thread it started, does can run next to it.
	e.progress("timing reference and candidate (%d calls each, alternating)", n)
	var refNoop, candNoop, refWarm, warm timedSeries
	var err error
	solo(r.cand, func() {
		refNoop, err = r.series(r.ref.p, cfg.NoopCalls, nil, true)
		if err == nil {
			refWarm, err = r.series(r.ref.p, cfg.Warmup, seeds[:cfg.Warmup], false)
		}
	})
	if err != nil {
		r.refFail("reference timing", err)
		return
	}
	solo(r.ref.p, func() { candNoop, err = r.series(r.cand, cfg.NoopCalls, nil, true) })
	if err != nil {
		r.candFail("timing", err)
		return
	}
	solo(r.ref.p, func() { warm, err = r.series(r.cand, cfg.Warmup, seeds[:cfg.Warmup], false) })
	if err != nil {
		r.candFail("warmup", err)
		return
	}
	var ref, cand timedSeries
	defer func() { // what the GPU had to do: warm-up and timed calls of both sides
		for _, ts := range []timedSeries{refWarm, warm, ref, cand} {
			for _, d := range ts.dev {
				r.phases.GPUWork += d / 1e3
			}
		}
	}()
	var checkErr error
	var threaded []int
	after := func(i int, leftThread bool) bool {
		if leftThread {
			threaded = append(threaded, i)
			if msg, tampered := threadCheck(threaded, i+1); tampered {
				r.res.Verdict, r.res.ErrorClass, r.res.Phase, r.res.Message = Fail, ClassTampering, "timing", msg
				checkErr = errors.New("tampering")
				return false
			}
		}
		if !check[i] {
			return true
		}
		tm.Checked++
		ok, err := r.recheck(i, seeds[cfg.Warmup+i])
		if err != nil {
			checkErr = err
			if leftThread && r.res.ErrorClass == ClassMismatch {
				r.res.ErrorClass = ClassTampering
				r.res.Message += "; the call had returned while a thread it started was still running: work left in the background, outside the timed region"
			}
			return false
		}
		return ok
	}
	timeRef := func(i int) bool {
		var s timedSeries
		solo(r.cand, func() { s, err = r.series(r.ref.p, 1, seeds[cfg.Warmup+i:cfg.Warmup+i+1], false) })
		if err != nil {
			r.refFail("reference timing", err)
			return false
		}
		ref = ref.extend(s, i)
		return true
	}
	timeCand := func(i int) bool {
		var s timedSeries
		solo(r.ref.p, func() { s, err = r.series(r.cand, 1, seeds[cfg.Warmup+i:cfg.Warmup+i+1], false) })
		if err != nil {
			r.candFail("timing", err)
			return false
		}
		cand = cand.extend(s, i)
		// The re-check needs the reference running; a failed one has recorded its verdict.
		if !after(i, len(s.threaded) > 0) {
			return false
		}
		return checkErr == nil && r.res.ErrorClass == ""
	}
	for i := 0; i < n; i++ {
		first, second := timeRef, timeCand
		if i%2 == 1 {
			first, second = timeCand, timeRef
		}
		if !first(i) || !second(i) {
			return
		}
	}
	if msg, _ := threadCheck(cand.threaded, len(cand.dev)); msg != "" {
		r.res.Warnings = append(r.res.Warnings, "candidate: "+msg)
	}
	g, err := call(r.ctx, r.cand, cfg.CallTimeout, guardRequest{})
	if err != nil {
		r.candFail("timing", err)
		return
	}
	if r.tamper(g.Tampered) {
		return
	}

	tm.Candidate, tm.Reference = Summarize(cand.dev), Summarize(ref.dev)
	tm.CandidateWall, tm.ReferenceWall = Summarize(cand.wall), Summarize(ref.wall)
	tm.Overhead = Summarize(candNoop.wall)
	if cfg.KeepSamples {
		tm.Samples, tm.RefSamples = cand.dev, ref.dev
	}
	if tm.Candidate.Median > 0 {
		tm.Speedup = tm.Reference.Median / tm.Candidate.Median
	}
	speedupSpread(tm, ref.dev, cand.dev)
	r.res.Timing = tm
	msg, forged := wallCheck(cand, candNoop)
	if forged {
		// A loaded machine can delay every call of one series. Before calling the timing forged,
		// time a second series on fresh inputs and judge both together: a forgery hides work in
		// every call of both, scheduling noise does not.
		e.progress("timing disagrees with the driver's clock; timing the candidate again to confirm")
		more := make([]int, n)
		for i := range more {
			more[i] = int(r.rng.Int64N(1 << 30))
		}
		var again, againNoop timedSeries
		solo(r.ref.p, func() {
			againNoop, err = r.series(r.cand, cfg.NoopCalls, nil, true)
			if err == nil {
				again, err = r.series(r.cand, n, more, false)
			}
		})
		if err != nil {
			r.candFail("timing", err)
			return
		}
		msg, forged = wallCheck(cand.extend(again, n), candNoop.extend(againNoop, len(candNoop.dev)))
	}
	if forged {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase, r.res.Message = Fail, ClassTampering, "timing", msg
	} else if msg != "" {
		r.res.Warnings = append(r.res.Warnings, "candidate: "+msg)
	}
	if msg, _ := wallCheck(ref, refNoop); msg != "" {
		r.res.Warnings = append(r.res.Warnings, "reference: "+msg)
	}
	if tm.Candidate.CV > 0.1 {
		r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("candidate timing is noisy (CV %.1f%%)", 100*tm.Candidate.CV))
	}
	if tm.Reference.CV > 0.1 {
		r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("reference timing is noisy (CV %.1f%%)", 100*tm.Reference.CV))
	}
	if forged {
		return
	}
	if why := unresolved(tm); why != "" {
		r.res.AddFlag(Flag{Name: sdk.FlagTimingUnresolved, Reason: why})
	} else if tm.SpeedupLow == 0 {
		r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("%d timed calls are too few to bound the speedup (%d at least)", len(cand.dev), minIntervalCalls))
	}
}

func (r *evalRun) noteMutation(idx []int, phase string) {
	if r.res.ErrorClass != "" {
		return
	}
	sort.Ints(idx)
	r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassInputMutated, phase
	r.res.Message = fmt.Sprintf("the candidate changed its input(s) %v during %s calls", idx, phase)
}

// recheck has the reference compare timed call i's output with the reference for its seed, and
// the call's inputs with inputs regenerated from the seed (a candidate that changes its inputs
// only while it is timed is caught here).
func (r *evalRun) recheck(i, seed int) (bool, error) {
	cfg := r.e.opt.Config
	t0 := time.Now()
	defer func() { r.phases.Rechecks += time.Since(t0).Seconds() }()
	base := filepath.Join(r.dumpDir, fmt.Sprintf("timed%d", i))
	rep, err := call(r.ctx, r.cand, cfg.CallTimeout, dumpLastRequest{Dump: base, InputsDump: base + "in"})
	if err != nil {
		r.candFail("timing", err)
		return false, err
	}
	if r.tamper(rep.Tampered) {
		return false, errors.New("tampering")
	}
	if rep.LateWrites {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassTampering, "timing"
		r.res.Message = fmt.Sprintf("the output of timed call %d kept changing after the call returned: work was left running in the background, outside the timed region", i)
		return false, errors.New("tampering")
	}
	out, ins := rep.Output, rep.Inputs
	if out == nil || ins == nil || !r.manifestInside(out) || !r.manifestInside(ins) {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassTampering, "timing"
		r.res.Message = "an output manifest is missing or points outside the evaluation's dump folder"
		return false, errors.New("tampering")
	}
	c, ok := r.compare(seed, "default", out, ins, "timing", false)
	if !ok {
		return false, errors.New("compare")
	}
	if len(c.InputsChanged) > 0 {
		r.noteMutation(c.InputsChanged, "timing")
		return false, errors.New("input mutated")
	}
	tr := Trial{Seed: seed, Dist: "default", OK: true}
	r.applyTrial(&tr, []compareReply{c}, "timing", i)
	if !tr.OK {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassMismatch, "timing"
		r.res.Message = fmt.Sprintf("timed call %d returned a wrong result (correctness trials had passed): %s", i, tr.Message)
		return false, errors.New("mismatch")
	}
	return true, nil
}

// threadCheck judges the calls that returned while a thread they had started was still running.
// One such call can be a worker pool growing late; a pattern of them is work moved off the timed
// region into the background.
func threadCheck(threaded []int, calls int) (msg string, tampered bool) {
	switch {
	case len(threaded) >= 2:
		return fmt.Sprintf("timed call %d returned while a thread it had started was still running (%d of %d timed calls did): work left in the background is outside the timed region", threaded[0], len(threaded), calls), true
	case len(threaded) == 1:
		return fmt.Sprintf("timed call %d returned while a thread it had started was still running", threaded[0]), false
	}
	return "", false
}

// wallCheck bounds the reported device times by the driver's own clock.
//
// For every call the driver sees wall_i - dev_i: time it waited that the reported device time does
// not explain. For an honest call that is the channel's round trip plus scheduling delay, which is
// what an empty call costs too; for a forged one (a patched timer, work hidden from the events)
// the hidden work is added on every call. Scheduling delay on a loaded machine only ever adds to
// some calls, so the check uses the least unexplained time over all calls, minus the least over
// the empty calls: a forgery shows up in every call, noise does not.
func wallCheck(calls, noop timedSeries) (msg string, forged bool) {
	if len(calls.dev) == 0 || len(noop.dev) == 0 {
		return "", false
	}
	gap := func(ts timedSeries) (least, median float64) {
		g := make([]float64, len(ts.dev))
		for i := range ts.dev {
			g[i] = ts.wall[i] - ts.dev[i]
		}
		st := Summarize(g)
		return st.Min, st.Median
	}
	callLeast, callMedian := gap(calls)
	noopLeast, noopMedian := gap(noop)
	hidden := callLeast - noopLeast
	dev := Summarize(calls.dev).Median
	switch {
	case hidden > 0.05 && hidden > dev:
		return fmt.Sprintf("even the call the driver saw finish fastest took %.4f ms more than its reported device time explains (reported median %.4f ms): timing forged", hidden, dev), true
	case callMedian-noopMedian > 0.02+0.25*dev:
		return fmt.Sprintf("calls took a median %.4f ms longer than their reported device time (median %.4f ms) and than an empty call; the machine may be loaded", callMedian-noopMedian, dev), false
	case callLeast < noopLeast-0.05-0.25*dev:
		return fmt.Sprintf("reported device time (median %.4f ms) exceeds the driver's wall clock for the same calls", dev), false
	}
	return "", false
}
