package feedback

import (
	"fmt"
	"math"
	"strings"

	"github.com/kbplatform/kbplatform/sdk"
)

// What each error class means to the model that wrote the kernel: a verdict's class alone
// ("load_error") says less than what the model should look at.
var classHints = map[string]string{
	sdk.ClassCompile:         "the kernel did not compile",
	sdk.ClassLoad:            "the module did not import or ModelNew could not be built",
	sdk.ClassRuntime:         "the forward raised an error",
	sdk.ClassIllegalMemory:   "the kernel accessed memory out of bounds",
	sdk.ClassTimeout:         "the kernel ran past its time limit (a hang or a far too slow kernel)",
	sdk.ClassCrash:           "the process running the kernel died",
	sdk.ClassMismatch:        "the outputs differ from the reference's",
	sdk.ClassInputMutated:    "the forward wrote into its inputs",
	sdk.ClassTampering:       "the kernel replaced or wrapped functions the harness relies on",
	sdk.ClassNondeterm:       "two calls on the same input gave different results",
	sdk.ClassStreamUnordered: "the output was not ready on the caller's CUDA stream when forward returned (work on a side stream the caller does not wait for)",
	sdk.ClassRejected:        "a static check rejected the file before it was built",
}

// Headline is one line about a kernel's outcome ("pass, 1.31x faster than PyTorch").
func Headline(k *Kernel) string {
	switch {
	case k == nil:
		return "nothing"
	case k.Source == "":
		return "no code in the reply"
	case k.Result == nil:
		if k.Note != "" {
			return "not evaluated: " + k.Note
		}
		return "not evaluated"
	}
	r := k.Result
	switch r.Verdict {
	case sdk.Pass:
		if r.Timing != nil && r.Timing.Speedup > 0 {
			return fmt.Sprintf("correct, %s the speed of eager PyTorch", num(r.Timing.Speedup)+"x")
		}
		return "correct"
	case sdk.Fail:
		s := "wrong: " + r.ErrorClass
		if m := r.Mismatch; m != nil && m.Detail != nil {
			if f, ok := m.Detail["wrong_fraction"].(float64); ok {
				s += fmt.Sprintf(", %s%% of elements wrong", num(100*f))
			}
			if e, ok := m.Detail["max_abs_err"].(float64); ok {
				s += ", max abs error " + num(e)
			}
		}
		return s
	default:
		return "no verdict (" + r.ErrorClass + ")"
	}
}

// Outcome is E: what the contract found, and for a wrong kernel how wrong and where.
func Outcome(k *Kernel) string {
	var w strings.Builder
	switch {
	case k.Source == "":
		w.WriteString("No kernel was evaluated: the reply had no code block defining ModelNew.\n")
		return w.String()
	case k.Result == nil:
		fmt.Fprintf(&w, "The kernel was not evaluated")
		if k.Note != "" {
			fmt.Fprintf(&w, ": %s", k.Note)
		}
		w.WriteString(".\n")
		return w.String()
	}
	r := k.Result
	switch r.Verdict {
	case sdk.Pass:
		w.WriteString("Verdict: pass — ModelNew's outputs match the reference")
		if n := len(r.Trials); n > 0 {
			fmt.Fprintf(&w, " on all %d correctness trials", n)
		}
		w.WriteString(".\n")
		if t := r.Timing; t != nil && t.Speedup > 0 {
			fmt.Fprintf(&w, "Speedup over eager PyTorch: %sx (median %s ms against the reference's %s ms).\n",
				num(t.Speedup), num(t.Candidate.Median), num(t.Reference.Median))
		}
	case sdk.Fail:
		fmt.Fprintf(&w, "Verdict: fail — %s", r.ErrorClass)
		if h := classHints[r.ErrorClass]; h != "" {
			fmt.Fprintf(&w, " (%s)", h)
		}
		if r.Phase != "" {
			fmt.Fprintf(&w, ", in the %s phase", r.Phase)
		}
		w.WriteString(".\n")
	default:
		fmt.Fprintf(&w, "No verdict about the kernel: the evaluation itself failed (%s). This may not be your kernel's fault.\n", r.ErrorClass)
	}
	if r.Verdict != sdk.Pass {
		if passed, n := trials(r); n > 0 {
			fmt.Fprintf(&w, "Correctness trials passed: %d of %d.\n", passed, n)
		}
		if m := r.Mismatch; m != nil {
			mismatch(&w, m)
		} else if r.Message != "" {
			fmt.Fprintf(&w, "Message:\n%s", fence("text", Cut(strings.TrimSpace(r.Message), MaxLog, "message")))
		}
		if c := r.Compile; c != nil && !c.OK && strings.TrimSpace(c.Log) != "" && r.ErrorClass == sdk.ClassCompile {
			log := strings.TrimSpace(c.Log)
			if len(log) > MaxLog {
				// A long log's errors may sit in the part left out: name them first.
				if errs := errorLines(log, 20); errs != "" {
					fmt.Fprintf(&w, "Errors in the compiler output:\n%s", fence("text", Cut(errs, MaxLog/2, "errors")))
				}
			}
			fmt.Fprintf(&w, "Compiler output:\n%s", fence("text", Cut(log, MaxLog, "compiler output")))
		}
		if tb := strings.TrimSpace(r.Traceback); tb != "" {
			fmt.Fprintf(&w, "Traceback (last lines):\n%s", fence("text", tail(tb, MaxLog/2)))
		}
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(&w, "Warning: %s\n", Cut(wn, 300, "warning"))
	}
	for _, f := range r.Flags {
		fmt.Fprintf(&w, "Flag %s: %s\n", f.Name, Cut(f.Reason, 300, "reason"))
	}
	return w.String()
}

func trials(r *sdk.Result) (passed, n int) {
	for _, t := range r.Trials {
		if t.OK {
			passed++
		}
	}
	return passed, len(r.Trials)
}

// mismatch says how wrong the first failing comparison was and where, from the contract's detail.
func mismatch(w *strings.Builder, m *sdk.Mismatch) {
	fmt.Fprintf(w, "First failing comparison: %s mismatch", m.Kind)
	if m.Phase == "timing" {
		fmt.Fprintf(w, " in timed call %d (the output was right in the correctness trials)", m.Call)
	}
	if m.Dist != "" {
		fmt.Fprintf(w, " (seed %d, %s inputs)", m.Seed, m.Dist)
	}
	w.WriteString(".\n")
	d := m.Detail
	// A values mismatch's message repeats the detail listed below; a structure, dtype or shape
	// mismatch's message is all there is.
	if _, values := d["wrong"]; !values {
		if msg := strings.TrimSpace(m.Message); msg != "" {
			fmt.Fprintf(w, "%s\n", Cut(msg, MaxLog, "message"))
		}
	}
	if d == nil {
		return
	}
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	if shape, ok := d["shape"].([]any); ok {
		add("output: %s %s", str(d["dtype"]), index(shape))
	}
	if wrong, ok := d["wrong"].(float64); ok {
		total, _ := d["total"].(float64)
		add("wrong elements: %s of %s (%s%%)", num(wrong), num(total), num(100*frac(d)))
	}
	if v, ok := d["max_abs_err"].(float64); ok {
		s := "max abs error " + num(v)
		if mean, ok := d["mean_abs_err"].(float64); ok {
			s += ", mean abs error " + num(mean)
		}
		if rel, ok := d["max_rel_err"].(float64); ok {
			s += ", max rel error " + num(rel)
		}
		add("%s", s)
	}
	if at, ok := d["atol"].(float64); ok {
		rt, _ := d["rtol"].(float64)
		add("tolerance: atol %s, rtol %s", num(at), num(rt))
	}
	if idx, ok := d["first_wrong_index"].([]any); ok {
		add("first wrong element at index %s: got %s, expected %s", index(idx), str(d["first_wrong_out"]), str(d["first_wrong_ref"]))
	}
	if n, ok := d["out_nonfinite"].(float64); ok && n > 0 {
		ref, _ := d["ref_nonfinite"].(float64)
		add("non-finite values: %s in the output (%s NaN), %s in the reference", num(n), num(asFloat(d["out_nan"])), num(ref))
	}
	if p, ok := d["pattern"].(map[string]any); ok {
		if s := str(p["summary"]); s != "" {
			add("where: %s", s)
		}
	}
	for _, l := range lines {
		fmt.Fprintf(w, "- %s\n", l)
	}
}

func frac(d map[string]any) float64 {
	if f, ok := d["wrong_fraction"].(float64); ok {
		return f
	}
	w, _ := d["wrong"].(float64)
	t, _ := d["total"].(float64)
	if t == 0 {
		return 0
	}
	return w / t
}

func asFloat(v any) float64 {
	f, _ := v.(float64)
	return f
}

// num formats a number the same way everywhere: integers as integers, others to 4 significant digits.
func num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.4g", v)
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case float64:
		return num(x)
	case string:
		return Cut(x, 200, "value")
	default:
		return Cut(fmt.Sprint(x), 200, "value")
	}
}

func index(v []any) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = str(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// tail keeps a traceback's last max bytes, where the error is.
func tail(s string, max int) string {
	if len(s) <= max {
		return s
	}
	start := len(s) - max
	for start < len(s) && !utf8Start(s[start]) {
		start++
	}
	return fmt.Sprintf("[... %d bytes left out ...]\n%s", start, s[start:])
}

// errorLines are the first max lines of a compiler log that report an error (gcc, clang, nvcc
// and ptxas all write "error" in them), without repeats.
func errorLines(log string, max int) string {
	var out []string
	seen := map[string]bool{}
	for _, l := range strings.Split(log, "\n") {
		l = strings.TrimSpace(l)
		low := strings.ToLower(l)
		if seen[l] || !(strings.Contains(low, "error:") || strings.Contains(low, ": error") || strings.Contains(low, " error ")) {
			continue
		}
		seen[l] = true
		out = append(out, Cut(l, 400, "line"))
		if len(out) == max {
			break
		}
	}
	return strings.Join(out, "\n")
}
