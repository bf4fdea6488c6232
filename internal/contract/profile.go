package contract

import (
	"encoding/json"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ianlancetaylor/demangle"
)

// The runtime evidence of a correct candidate: one more call on trusted inputs, after timing and
// never timed, made under torch.profiler in the candidate's process (kbpworker/profile.py). The
// reference compares its output like a trial's and measures its precision against a float64 run
// of the task (kbpworker/precision.py). The driver turns the raw facts into Result.Profile (the
// P of refinement feedback) and the runtime flags (runtimeflags.go). The kernel list comes from
// the candidate's own process, so it is evidence, not proof; which kernels are the candidate's,
// and the precision, are decided on the trusted side.

// ProfileRows bounds Result.Profile: the most expensive kernels, then one "other" row.
const ProfileRows = 20

// ProfileTool names the profiler in Result.Profile.
const ProfileTool = "torch.profiler"

// workerEvidence is the candidate process's profile reply.
type workerEvidence struct {
	Device     string        `json:"device"`
	Extensions []string      `json:"extensions"`
	Rows       []evidenceRow `json:"rows"`
	Launches   int           `json:"launches"`
	WallUS     float64       `json:"wall_us"`
	ExtCalls   []evidenceRow `json:"ext_calls"`
	Error      string        `json:"error"`
}

// evidenceRow is one kernel, operator or extension function, summed over its calls.
type evidenceRow struct {
	Name  string  `json:"name"`
	Calls int64   `json:"calls"`
	US    float64 `json:"us"`
	Kind  string  `json:"kind"` // kernel, memcpy, memset (GPU); op (CPU); empty for ext_calls
}

// measuredPrecision is the reference's measurement of a correct output.
type measuredPrecision struct {
	Dtype          string  `json:"dtype"`
	CandidateError float64 `json:"candidate_error"`
	ReferenceError float64 `json:"reference_error"`
	Elements       int64   `json:"elements"`
	Skipped        string  `json:"skipped"`
}

// profile makes the profiled call and records its evidence. A wrong output of that call fails
// the kernel like any trial (it is a correctness call on trusted inputs); the flags never do.
func (r *evalRun) profile(k Kernel) {
	cfg := r.e.opt.Config
	dist := "default"
	if len(r.task.Distributions) > 0 {
		dist = r.task.Distributions[0]
	}
	seed := int(r.rng.Int64N(1 << 30))
	r.e.progress("profiling one call of %s", k.Name)
	base := filepath.Join(r.dumpDir, "profile")
	rep, err := call(r.ctx, r.cand, cfg.CallTimeout, profileRequest{Seed: seed, Dist: dist, Dump: base})
	if err != nil {
		r.tamper(rep.Tampered)
		r.candFail("profile", err)
		return
	}
	if r.tamper(rep.Tampered) {
		r.res.Phase = "profile"
		return
	}
	out := rep.Output
	if out == nil || !r.manifestInside(out) {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassTampering, "profile"
		r.res.Message = "the profiled call's reply does not carry the outputs the harness wrote"
		return
	}
	c, ok := r.compareWith(compareRequest{Seed: seed, Dist: dist, Output: out, Precision: true}, "profile")
	if !ok {
		return
	}
	tr := Trial{Seed: seed, Dist: dist, OK: true}
	r.applyTrial(&tr, []compareReply{c}, "profile", 0)
	if !tr.OK {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassMismatch, "profile"
		r.res.Message = "the profiled call (an extra correctness call after timing) is wrong: " + tr.Message
		return
	}
	var ev workerEvidence
	if err := json.Unmarshal(rep.Profile, &ev); err != nil {
		r.res.Warnings = append(r.res.Warnings, "runtime evidence unreadable: "+err.Error())
		return
	}
	ev.demangle()
	var prec *measuredPrecision
	if len(c.Precision) > 0 {
		var p measuredPrecision
		if json.Unmarshal(c.Precision, &p) == nil {
			prec = &p
		}
	}
	own := kernelsOf(k.Source)
	r.res.Profile = buildProfile(ev, own)
	for _, f := range runtimeFlags(ev, own, prec, k.Source) {
		r.res.AddFlag(f)
	}
	r.res.Warnings = append(r.res.Warnings, evidenceWarnings(ev, own)...)
}

// demangle gives every kernel its demangled name: the profiler passes some on as the linker
// wrote them (on torch 2.11, CUTLASS's templated kernels arrive as _ZN7cutlass6KernelI...), and
// the names are matched against the candidate's source, and read by people, demangled.
func (ev *workerEvidence) demangle() {
	for i := range ev.Rows {
		ev.Rows[i].Name = demangle.Filter(ev.Rows[i].Name)
	}
}

// buildProfile turns the worker's rows into Result.Profile: on a GPU the device activity of the
// forward, each kernel marked as the candidate's own or not; on the CPU the candidate's extension
// functions (its own; their time includes the ATen operators they call) and ATen operators by
// their own time, against the forward's wall time. Nil when the profiler recorded nothing.
func buildProfile(ev workerEvidence, own ownKernels) *Profile {
	var rows []KernelTime
	var total float64
	if ev.Device == "cuda" {
		for _, row := range ev.Rows {
			rows = append(rows, KernelTime{Name: row.Name, Calls: row.Calls, TotalUS: row.US, Custom: row.Kind == "kernel" && own.custom(row.Name)})
			total += row.US
		}
	} else {
		for _, row := range ev.ExtCalls {
			rows = append(rows, KernelTime{Name: row.Name, Calls: row.Calls, TotalUS: row.US, Custom: true})
		}
		for _, row := range ev.Rows {
			rows = append(rows, KernelTime{Name: row.Name, Calls: row.Calls, TotalUS: row.US})
		}
		total = ev.WallUS
	}
	if len(rows) == 0 {
		return nil
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].TotalUS > rows[j].TotalUS })
	if len(rows) > ProfileRows {
		other := KernelTime{Name: "other"}
		for _, k := range rows[ProfileRows:] {
			other.Calls += k.Calls
			other.TotalUS += k.TotalUS
		}
		other.Name = "other (" + strconv.Itoa(len(rows)-ProfileRows) + " more)"
		rows = append(rows[:ProfileRows], other)
	}
	for i := range rows {
		rows[i].Name = shortName(rows[i].Name)
		if total > 0 {
			rows[i].Share = rows[i].TotalUS / total
		}
	}
	return &Profile{Tool: ProfileTool, TotalUS: total, Kernels: rows}
}

// shortName bounds a kernel name for the record: CUTLASS's template names run to kilobytes.
func shortName(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	const limit = 240
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
