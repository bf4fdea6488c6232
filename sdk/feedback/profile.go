package feedback

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/kbplatform/kbplatform/sdk"
)

// Profile is P: where one forward of a correct kernel spends its time, most expensive kernels
// first, and its measured speedup over eager PyTorch.
func Profile(r *sdk.Result) string {
	switch {
	case r == nil || r.Verdict != sdk.Pass:
		return "No profile: only a correct kernel is profiled.\n"
	case r.Profile == nil || len(r.Profile.Kernels) == 0:
		s := "No profile: the target did not profile this kernel.\n"
		if r.Timing != nil && r.Timing.Speedup > 0 {
			s += fmt.Sprintf("Measured speedup over eager PyTorch: %sx.\n", num(r.Timing.Speedup))
		}
		return s
	}
	p := r.Profile
	var w strings.Builder
	fmt.Fprintf(&w, "One forward, profiled with %s: %s µs of kernel time in %d kernels", orUnknown(p.Tool), num(p.TotalUS), len(p.Kernels))
	if r.Timing != nil && r.Timing.Speedup > 0 {
		fmt.Fprintf(&w, "; measured speedup over eager PyTorch %sx", num(r.Timing.Speedup))
	}
	w.WriteString(".\n")
	var custom, torch float64
	for _, k := range p.Kernels {
		if k.Custom {
			custom += k.Share
		} else {
			torch += k.Share
		}
	}
	fmt.Fprintf(&w, "Your own kernels take %s%% of that time, PyTorch's kernels %s%%.\n\n", num(round1(100*custom)), num(round1(100*torch)))
	w.WriteString("| share | total µs | calls | whose | kernel |\n|---|---|---|---|---|\n")
	// Most expensive first; equal shares keep the profiler's order.
	kernels := slices.Clone(p.Kernels)
	slices.SortStableFunc(kernels, func(a, b sdk.KernelTime) int { return cmp.Compare(b.Share, a.Share) })
	for i, k := range kernels {
		if i == maxKernels {
			var rest float64
			for _, k := range kernels[i:] {
				rest += k.Share
			}
			fmt.Fprintf(&w, "| %s%% | | | | %d more kernels |\n", num(round1(100*rest)), len(kernels)-i)
			break
		}
		whose := "PyTorch"
		if k.Custom {
			whose = "yours"
		}
		fmt.Fprintf(&w, "| %s%% | %s | %d | %s | %s |\n", num(round1(100*k.Share)), num(k.TotalUS), k.Calls, whose,
			strings.ReplaceAll(Cut(k.Name, 120, "name"), "|", "\\|"))
	}
	return w.String()
}

func round1(v float64) float64 {
	return float64(int64(v*10+0.5)) / 10
}

func orUnknown(s string) string {
	if s == "" {
		return "an unnamed profiler"
	}
	return s
}
