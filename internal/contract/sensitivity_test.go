package contract

import (
	"context"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

// A task whose output barely changes under its own distributions gets one more trial under a
// distribution that changes it: a kernel that returns the constant fails it, an honest one passes
// it. A task whose output no distribution changes flags every result. Tasks whose outputs change
// get neither.
func TestInputInsensitiveTasks(t *testing.T) { inputInsensitive(t, "cpu") }

// TestGPUInputInsensitiveTasks is the same on the first GPU (outputs read through CUDA IPC, the
// samples on the device). It is skipped without one; scripts/gpu-check runs it.
func TestGPUInputInsensitiveTasks(t *testing.T) {
	if !testPython(t).CUDAAvail {
		t.Skip("no CUDA device")
	}
	inputInsensitive(t, "cuda:0")
}

func inputInsensitive(t *testing.T, device string) {
	e := newEvaluator(t, nil)
	// The trials the sensitivity check added (not the probes every task gets: probe_test.go).
	added := func(res *Result) []Trial {
		var out []Trial
		for _, tr := range res.Trials {
			if tr.Added == addedTrialReason {
				out = append(out, tr)
			}
		}
		return out
	}
	faint := loadTask(t, "faint_mean")

	res := e.Evaluate(context.Background(), faint, loadKernel(t, "zero_scalar"), device, nil)
	if res.Verdict != Fail || res.ErrorClass != ClassMismatch {
		t.Fatalf("a constant on a faint mean: got %s/%s: %s\n%s", res.Verdict, res.ErrorClass, res.Message, res.Log)
	}
	extra := added(res)
	if len(extra) != 1 || extra[0].OK || extra[0].Dist != "offset" || len(res.Trials) != 2*e.opt.Config.Seeds+1 {
		t.Fatalf("trials %+v: want the task's own, all passed, and one failed added trial under offset", res.Trials)
	}
	for _, tr := range res.Trials[:len(res.Trials)-1] {
		if !tr.OK {
			t.Errorf("the constant failed a trial of the task's own distributions (the task does not test what it should): %+v", tr)
		}
	}
	if !strings.Contains(res.Message, "wrong on 1 of") || !strings.Contains(res.Message, "under offset inputs, in a trial added") {
		t.Errorf("message %q: want the added trial named", res.Message)
	}
	if res.Timing != nil {
		t.Error("a failed kernel was timed")
	}

	res = e.Evaluate(context.Background(), faint, loadKernel(t, "faint_mean_honest"), device, nil)
	if res.Verdict != Pass || res.HasFlag(sdk.FlagInputInsensitive) {
		t.Fatalf("honest faint mean: got %s %s: %s, flags %v\n%s", res.Verdict, res.ErrorClass, res.Message, res.Flags, res.Log)
	}
	if extra := added(res); len(extra) != 1 || !extra[0].OK || extra[0].Dist != "offset" {
		t.Errorf("honest faint mean: added trials %+v, want one passed under offset", extra)
	}
	if len(res.Phases.Trials) != len(res.Trials) {
		t.Errorf("%d trial times for %d trials", len(res.Phases.Trials), len(res.Trials))
	}

	centred := loadTask(t, "centered_mean")
	for _, k := range []string{"zero_scalar", "centered_mean_honest"} {
		res = e.Evaluate(context.Background(), centred, loadKernel(t, k), device, nil)
		if res.Verdict != Pass || !res.HasFlag(sdk.FlagInputInsensitive) || len(added(res)) != 0 {
			t.Fatalf("%s on a centred mean: got %s %s, flags %v, trials %+v: want a pass flagged %s",
				k, res.Verdict, res.Message, res.Flags, res.Trials, sdk.FlagInputInsensitive)
		}
		if r := res.FlagReason(sdk.FlagInputInsensitive); !strings.Contains(r, "default, scaled") || !strings.Contains(r, "offset, positive, uniform, sparse, large") {
			t.Errorf("flag reason %q: want the distributions tried", r)
		}
	}

	res = e.Evaluate(context.Background(), loadTask(t, "scale_relu"), loadKernel(t, "honest_torch"), device, nil)
	if res.Verdict != Pass || len(added(res)) != 0 || res.HasFlag(sdk.FlagInputInsensitive) {
		t.Fatalf("scale_relu: got %s, trials %+v, flags %v: want a pass with no trial added by the sensitivity check", res.Verdict, res.Trials, res.Flags)
	}

	// tasks validate says what evaluations will do.
	v := e.Validate(context.Background(), faint, device)
	if w := strings.Join(v.Warnings, "; "); !v.OK || !strings.Contains(w, "adds a trial under offset") {
		t.Errorf("validate faint_mean: ok %v, warnings %q", v.OK, w)
	}
	v = e.Validate(context.Background(), centred, device)
	if w := strings.Join(v.Warnings, "; "); !v.OK || !strings.Contains(w, "flagged "+sdk.FlagInputInsensitive) {
		t.Errorf("validate centered_mean: ok %v, warnings %q", v.OK, w)
	}
	v = e.Validate(context.Background(), loadTask(t, "scale_relu"), device)
	if w := strings.Join(v.Warnings, "; "); strings.Contains(w, "constant") {
		t.Errorf("validate scale_relu: warnings %q", w)
	}
}
