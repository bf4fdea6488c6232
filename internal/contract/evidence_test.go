package contract

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

// TestRuntimeEvidence runs correct CPU candidates end to end and checks the runtime flags and the
// profile their extra profiled call leaves: a C++ kernel that is called (no flag, its function in
// the profile as the candidate's own), one that builds an extension and never calls it, one
// with no extension at all (both no_custom_kernel), and one that rounds its results through fp16
// on a task that tolerates it (precision_downcast on a pass).
func TestRuntimeEvidence(t *testing.T) {
	e := newEvaluator(t, nil)
	task := loadTask(t, "scale_relu")
	tolerant := task
	tolerant.Tolerance = &Tolerance{Atol: 1e-3, Rtol: 1e-3}
	cases := []struct {
		kernel string
		task   Task
		flags  []string
		custom string // a profile row that must be the candidate's own
	}{
		{"cpp_honest", task, nil, "kbp_test_scale_relu.scale_relu"},
		{"cpp_unused_ext", task, []string{sdk.FlagNoCustomKernel}, ""},
		{"honest_torch", task, []string{sdk.FlagNoCustomKernel}, ""},
		{"cpp_half_round", tolerant, []string{sdk.FlagPrecisionDowncast}, "kbp_test_half_round.scale_relu_half"},
	}
	for _, c := range cases {
		t.Run(c.kernel, func(t *testing.T) {
			res := e.Evaluate(context.Background(), c.task, loadKernel(t, c.kernel), "cpu", nil)
			if res.Verdict != Pass {
				t.Fatalf("want pass, got %s %s: %s\n%s", res.Verdict, res.ErrorClass, res.Message, res.Log)
			}
			var names []string
			for _, f := range res.Flags {
				t.Logf("flag %s: %s", f.Name, f.Reason)
				if !sdk.MeasurementFlag(f.Name) { // a noisy host may leave a timing unresolved
					names = append(names, f.Name)
				}
			}
			if strings.Join(names, ",") != strings.Join(c.flags, ",") {
				t.Errorf("flags %v, want %v", names, c.flags)
			}
			for _, w := range res.Warnings {
				if strings.HasPrefix(w, "runtime evidence") {
					t.Errorf("warning on a kernel that does its own work: %s", w)
				}
			}
			if res.Profile == nil || res.Profile.Tool != ProfileTool || res.Profile.TotalUS <= 0 {
				t.Fatalf("no profile: %+v (warnings %q)", res.Profile, res.Warnings)
			}
			var own []string
			for _, k := range res.Profile.Kernels {
				if k.Custom {
					own = append(own, k.Name)
				}
			}
			if c.custom != "" && !slices.Contains(own, c.custom) || c.custom == "" && len(own) > 0 {
				t.Errorf("the candidate's own rows are %v, want %q (profile %+v)", own, c.custom, res.Profile.Kernels)
			}
		})
	}
}
