package contract

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/kbplatform/kbplatform/sdk"
)

// The runtime flags the contract raises from a correct candidate's evidence (profile.go). A flag
// never changes a verdict; reports can leave flagged results out of fast_p (--exclude-flag).

// PrecisionLimit is the normwise relative error, against a float64 run of the task, above which a
// float32 output was computed in less than float32 precision. Rounding to a 10-bit mantissa (fp16,
// TF32) gives about 2^-12 whatever the task, bf16 about 2^-9; float32 arithmetic, summed in any
// order, stays far below 2^-14 on the suite's tasks. The candidate must also be PrecisionRatio
// times worse than the task's own float32 eager output, so that a task whose eager float32 result
// is itself that far from exact flags nobody.
const (
	PrecisionLimit = 1.0 / (1 << 14)
	PrecisionRatio = 16
	// customShareWarning: custom kernels that ran for less than this share of the forward's device
	// time get a warning (a trivial kernel launched beside delegated work).
	customShareWarning = 0.1
)

// tf32Re finds what makes fp32 products TF32: Triton's tl.dot without an IEEE input precision (its
// default is TF32), and explicit TF32 in Triton, CUDA WMMA/MMA or CUTLASS.
var (
	tritonDotRe = regexp.MustCompile(`\btl\.dot\s*\(`)
	ieeeDotRe   = regexp.MustCompile(`input_precision\s*=\s*["']ieee["']|allow_tf32\s*=\s*False`)
	tf32Re      = regexp.MustCompile(`input_precision\s*=\s*["']tf32|allow_tf32\s*=\s*True|precision::tf32|\.tf32\b|tfloat32_t|__float_to_tf32`)
)

// runtimeFlags decides the flags of a correct candidate's evidence.
func runtimeFlags(ev workerEvidence, own ownKernels, prec *measuredPrecision, source string) []Flag {
	var flags []Flag
	if f, ok := noCustomKernel(ev, own); ok {
		flags = append(flags, f)
	}
	if f, ok := precisionDowncast(prec, source); ok {
		flags = append(flags, f)
	}
	return flags
}

// noCustomKernel: on a GPU, no device kernel that ran is one the candidate's source defines; on
// the CPU, the candidate never called a function of the extension it built.
func noCustomKernel(ev workerEvidence, own ownKernels) (Flag, bool) {
	if ev.Error != "" {
		return Flag{}, false
	}
	if ev.Device != "cuda" {
		if len(ev.ExtCalls) > 0 {
			return Flag{}, false
		}
		if len(ev.Extensions) == 0 {
			return Flag{Name: sdk.FlagNoCustomKernel, Reason: "runtime: the candidate built no extension, and its forward ran only PyTorch's operators" + topOps(ev.Rows)}, true
		}
		return Flag{Name: sdk.FlagNoCustomKernel, Reason: fmt.Sprintf("runtime: the candidate built %s but its forward called none of its functions%s",
			strings.Join(ev.Extensions, ", "), topOps(ev.Rows))}, true
	}
	kernels, _, n := deviceTime(ev, own)
	switch {
	case kernels > 0:
		return Flag{}, false
	case n == 0 && ev.Launches > 0:
		return Flag{}, false // the profiler saw launches but no device activity: no evidence (a warning says so)
	case n == 0:
		return Flag{Name: sdk.FlagNoCustomKernel, Reason: "runtime: no device kernel ran during a profiled forward"}, true
	}
	reason := fmt.Sprintf("runtime: none of the %d device kernels of a profiled forward is defined in the candidate's source%s", n, topOps(ev.Rows))
	if calls := extCallCount(ev); calls > 0 {
		// Delegation inside the extension: its functions ran, and launched PyTorch's kernels.
		reason += fmt.Sprintf("; its extension's functions were called %d time(s) and launched none of their own", calls)
	}
	return Flag{Name: sdk.FlagNoCustomKernel, Reason: reason}, true
}

// deviceTime splits a GPU forward's device time between the candidate's own kernels and all of
// them, over every kernel the profiler recorded (the stored profile keeps only the top rows).
func deviceTime(ev workerEvidence, own ownKernels) (custom, total float64, kernels int) {
	for _, row := range ev.Rows {
		if row.Kind != "kernel" {
			continue
		}
		kernels++
		total += row.US
		if own.custom(row.Name) {
			custom += row.US
		}
	}
	return custom, total, kernels
}

func extCallCount(ev workerEvidence) int64 {
	var n int64
	for _, c := range ev.ExtCalls {
		n += c.Calls
	}
	return n
}

// topOps names the most expensive rows, as the evidence behind a flag.
func topOps(rows []evidenceRow) string {
	var total float64
	for _, r := range rows {
		total += r.US
	}
	var names []string
	for _, r := range rows {
		if len(names) == 3 {
			break
		}
		name := shortName(r.Name)
		if len(name) > 80 {
			name = name[:77] + "..."
		}
		if total > 0 {
			name += fmt.Sprintf(" %.0f%%", 100*r.US/total)
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return ""
	}
	return " (ran: " + strings.Join(names, ", ") + ")"
}

// precisionDowncast: a float32 output measurably less precise than float32 arithmetic gives.
func precisionDowncast(p *measuredPrecision, source string) (Flag, bool) {
	if p == nil || p.Skipped != "" || p.Dtype != "float32" || p.CandidateError <= PrecisionLimit || p.CandidateError <= PrecisionRatio*p.ReferenceError {
		return Flag{}, false
	}
	reason := fmt.Sprintf("runtime: measured precision %.1f bits (normwise relative error %.2g against a float64 run of the task; the task's float32 eager output: %.2g, %.1f bits), below float32",
		bits(p.CandidateError), p.CandidateError, p.ReferenceError, bits(p.ReferenceError))
	if usesTF32(source) {
		reason = "tf32: " + reason + "; the source computes fp32 products in TF32 (Triton's tl.dot does unless input_precision=\"ieee\")"
	}
	return Flag{Name: sdk.FlagPrecisionDowncast, Reason: reason}, true
}

// bits is the precision an error corresponds to: -log2 of it (float32's 24-bit significand gives
// about 24 on one rounding).
func bits(err float64) float64 {
	if err <= 0 {
		return 53
	}
	return -math.Log2(err)
}

// usesTF32 reports whether the source computes fp32 products in TF32, explicitly or by Triton's
// default.
func usesTF32(source string) bool {
	if tf32Re.MatchString(source) {
		return true
	}
	return tritonDotRe.MatchString(source) && !ieeeDotRe.MatchString(source)
}

// evidenceWarnings are what the evidence shows without raising a flag: a profiler that recorded
// nothing, or custom kernels (on the CPU, extension functions) that did a small share of the work.
func evidenceWarnings(ev workerEvidence, own ownKernels) []string {
	if ev.Error != "" {
		return []string{"runtime evidence not collected: " + ev.Error}
	}
	custom, total, n := deviceTime(ev, own)
	if ev.Device == "cuda" && n == 0 && ev.Launches > 0 {
		return []string{fmt.Sprintf("runtime evidence: the profiler saw %d kernel launches but no device activity; no_custom_kernel not decided", ev.Launches)}
	}
	if ev.Device != "cuda" {
		// The forward's wall time is mostly the profiler's own overhead on a small CPU task: the
		// share is of the time in the extension and in PyTorch's operators.
		var own, aten float64
		for _, c := range ev.ExtCalls {
			own += c.US
		}
		for _, r := range ev.Rows {
			aten += r.US
		}
		if own > 0 && own/(own+aten) < customShareWarning {
			return []string{fmt.Sprintf("runtime evidence: the candidate's extension functions took %.1f%% of a profiled forward's time in them and in PyTorch's operators", 100*own/(own+aten))}
		}
		return nil
	}
	if custom > 0 && custom/total < customShareWarning {
		return []string{fmt.Sprintf("runtime evidence: the candidate's own kernels took %.1f%% of a profiled forward's device time; the rest ran in PyTorch's or a library's kernels", 100*custom/total)}
	}
	return nil
}
