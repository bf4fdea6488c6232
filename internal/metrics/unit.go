package metrics

import (
	"sort"

	"github.com/kbplatform/kbplatform/sdk"
)

// Options say which rows count and against what.
type Options struct {
	// Baseline is what a speedup is measured against: Eager ("" too) or a torch.compile mode.
	Baseline string
	// ExcludeFlags: a row carrying any of these flags counts as an incorrect kernel of class
	// "flagged" (it stays stored; it just does not earn a pass). The kernel flags
	// (sdk.KernelFlags) are excluded whatever it says, unless CountFlagged.
	ExcludeFlags []string
	// CountFlagged counts a pass carrying a kernel flag (no custom kernel, delegation, ...) as
	// a solution: the "counting flagged" figure reports show beside the real one.
	CountFlagged bool
}

// ClassFlagged is the class of a passing row left out because of a flag (a kernel flag, or one
// of Options.ExcludeFlags).
const ClassFlagged = "flagged"

// Flagged is o counting passes that carry a kernel flag as solutions.
func (o Options) Flagged() Options {
	o.CountFlagged = true
	return o
}

// speedup is the row's speedup against the baseline; ok is false when that baseline was not
// measured on the row's hardware.
func (o Options) speedup(r Row) (float64, bool) {
	if o.Baseline == "" || o.Baseline == Eager {
		return r.Speedup, true
	}
	v, ok := r.Versus[o.Baseline]
	return v, ok
}

// correct reports whether the row is a pass that counts under the options.
func (o Options) correct(r Row) bool {
	if r.Verdict != "pass" || (len(o.ExcludeFlags) > 0 && r.HasFlag(o.ExcludeFlags)) {
		return false
	}
	return o.CountFlagged || !r.HasFlag(sdk.KernelFlags())
}

// AnyFlagged reports whether a pass of the units carries a kernel flag: only then does the
// figure counting flagged differ.
func AnyFlagged(units []*Unit) bool {
	kf := sdk.KernelFlags()
	for _, u := range units {
		for _, r := range u.Rows {
			if r.Verdict == "pass" && r.Judged() && r.HasFlag(kf) {
				return true
			}
		}
	}
	return false
}

// Unit is one (arm, task): every attempt an arm made at a task.
type Unit struct {
	Study string `json:"study"`
	Arm   Arm    `json:"arm"`
	Task  string `json:"task"`
	Level int    `json:"level"`
	Rows  []Row  `json:"-"`
}

// Units groups rows into units, ordered by study, arm and task.
func Units(rows []Row) []*Unit {
	type key struct {
		study string
		arm   Arm
		task  string
	}
	by := map[key]*Unit{}
	var out []*Unit
	for _, r := range rows {
		k := key{r.Study, ArmOf(r), r.Task}
		u := by[k]
		if u == nil {
			u = &Unit{Study: r.Study, Arm: k.arm, Task: r.Task}
			by[k] = u
			out = append(out, u)
		}
		if u.Level == 0 {
			u.Level = r.Level
		}
		u.Rows = append(u.Rows, r)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Study != b.Study {
			return a.Study < b.Study
		}
		if a.Arm != b.Arm {
			return a.Arm.String() < b.Arm.String()
		}
		return a.Task < b.Task
	})
	return out
}

// Judged reports whether any of the unit's attempts is a verdict about a kernel (or a generation
// failure). A unit without one failed for reasons that are not the model's and is in no fast_p.
func (u *Unit) Judged() bool {
	for _, r := range u.Rows {
		if r.Judged() {
			return true
		}
	}
	return false
}

// Best is the unit's best speedup among its correct attempts with turn ≤ maxTurn (maxTurn < 0:
// all turns). correct says whether any such attempt passed; measured whether every one of them
// has a speedup against the baseline.
func (u *Unit) Best(o Options, maxTurn int) (best float64, correct, measured bool) {
	measured = true
	for _, r := range u.Rows {
		if maxTurn >= 0 && r.Turn > maxTurn {
			continue
		}
		if !r.Judged() || !o.correct(r) {
			continue
		}
		correct = true
		s, ok := o.speedup(r)
		if !ok {
			measured = false
			continue
		}
		if s > best {
			best = s
		}
	}
	return best, correct, measured
}

// MaxTurn is the highest turn among the units' attempts.
func MaxTurn(units []*Unit) int {
	m := 0
	for _, u := range units {
		for _, r := range u.Rows {
			m = max(m, r.Turn)
		}
	}
	return m
}

// Group splits units by a key, keys in the order they first appear.
func Group(units []*Unit, key func(*Unit) string) (keys []string, by map[string][]*Unit) {
	by = map[string][]*Unit{}
	for _, u := range units {
		k := key(u)
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], u)
	}
	return keys, by
}

// RowsOf flattens units back into their rows.
func RowsOf(units []*Unit) []Row {
	var out []Row
	for _, u := range units {
		out = append(out, u.Rows...)
	}
	return out
}
