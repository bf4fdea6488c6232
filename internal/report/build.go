package report

import (
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/kbplatform/kbplatform/internal/metrics"
)

// Options say what a report computes.
type Options struct {
	// P is the grid of p for fast_p (nil: metrics.DefaultP).
	P []float64
	// K are the k of fast_p@k (nil: 1, 5, 10, up to the most attempts a task had).
	K       []int
	Metrics metrics.Options
}

// Report is a study's tables, computed (the JSON of `study report --json`).
type Report struct {
	Study        string     `json:"study"`
	Name         string     `json:"name,omitempty"`
	Baseline     string     `json:"baseline"`
	ExcludeFlags []string   `json:"exclude_flags,omitempty"`
	P            []float64  `json:"p"`
	Attempts     int        `json:"attempts"`
	Arms         []ArmTable `json:"arms"`
	Levels       []LevelRow `json:"levels"`
	AtK          []AtKRow   `json:"at_k,omitempty"`
	Turns        []TurnRow  `json:"turns,omitempty"`
	Missing      int        `json:"missing_baseline,omitempty"` // tasks without the baseline on their hardware
	// Hardware lists the GPU models (else CPUs) the study's kernels ran on when there is more
	// than one (a mixed host, a study resumed elsewhere): these tables pool them, and
	// `study report --compare ID` splits them, one side per model.
	Hardware []string `json:"hardware,omitempty"`
	units    []*metrics.Unit
}

// ArmTable is one arm's summary.
type ArmTable struct {
	Arm     string            `json:"arm"`
	Parts   metrics.Arm       `json:"parts"`
	Tasks   int               `json:"tasks"`
	Judged  int               `json:"judged"` // tasks with a verdict about some kernel
	FastP   []metrics.Rate    `json:"fast_p"` // one per Report.P
	Fast0   metrics.Rate      `json:"fast_0"`
	Fast1   metrics.Rate      `json:"fast_1"`
	CI0     metrics.Interval  `json:"fast_0_ci"`
	CI1     metrics.Interval  `json:"fast_1_ci"`
	GeoMean float64           `json:"geomean_speedup"`
	GeoN    int               `json:"geomean_tasks"`
	GeoCI   metrics.Interval  `json:"geomean_ci"`
	Classes metrics.Breakdown `json:"classes"`
	// Fast0Flagged and Fast1Flagged count passes that carry a kernel flag as solutions too: the
	// figure beside fast_0 and fast_1, shown when some pass of the arm carries one.
	Fast0Flagged metrics.Rate `json:"fast_0_counting_flagged"`
	Fast1Flagged metrics.Rate `json:"fast_1_counting_flagged"`
	AnyFlagged   bool         `json:"any_flagged,omitempty"`
}

// LevelRow is one arm at one level.
type LevelRow struct {
	Arm     string       `json:"arm"`
	Level   int          `json:"level"`
	Tasks   int          `json:"tasks"`
	Fast0   metrics.Rate `json:"fast_0"`
	Fast1   metrics.Rate `json:"fast_1"`
	GeoMean float64      `json:"geomean_speedup"`
}

// AtKRow is fast_p@k of one arm at one k.
type AtKRow struct {
	Arm   string       `json:"arm"`
	K     int          `json:"k"`
	Fast0 metrics.Rate `json:"fast_0"`
	Fast1 metrics.Rate `json:"fast_1"`
	// Fast0Flagged and Fast1Flagged are fast_0@k and fast_1@k counting passes that carry a
	// kernel flag.
	Fast0Flagged metrics.Rate `json:"fast_0_counting_flagged"`
	Fast1Flagged metrics.Rate `json:"fast_1_counting_flagged"`
}

// TurnRow is fast_p@N of one arm after turn N.
type TurnRow struct {
	Arm   string       `json:"arm"`
	Turn  int          `json:"turn"`
	Fast0 metrics.Rate `json:"fast_0"`
	Fast1 metrics.Rate `json:"fast_1"`
}

// Build computes a study's report.
func Build(s *Study, opt Options) *Report {
	mo := opt.Metrics
	if mo.Baseline == "" {
		mo.Baseline = metrics.Eager
	}
	ps := opt.P
	if len(ps) == 0 {
		ps = metrics.DefaultP
	}
	rows := s.Rows()
	units := metrics.Units(rows)
	rep := &Report{Study: s.ID, Name: s.Name, Baseline: mo.Baseline, ExcludeFlags: mo.ExcludeFlags, P: ps,
		Attempts: len(s.Attempts), units: units}
	for _, r := range rows {
		if r.Hardware != "" && !slices.Contains(rep.Hardware, r.Hardware) {
			rep.Hardware = append(rep.Hardware, r.Hardware)
		}
	}
	if len(rep.Hardware) < 2 {
		rep.Hardware = nil
	}
	sort.Strings(rep.Hardware)
	armKey := func(u *metrics.Unit) string { return u.Arm.String() }
	arms, byArm := metrics.Group(units, armKey)
	missing := map[string]bool{}
	for _, name := range arms {
		us := byArm[name]
		t := ArmTable{Arm: name, Parts: us[0].Arm, Tasks: len(us)}
		for _, u := range us {
			if u.Judged() {
				t.Judged++
			}
		}
		for _, p := range ps {
			r := metrics.FastP(us, p, mo)
			t.FastP = append(t.FastP, r)
		}
		for _, u := range us {
			if _, correct, measured := u.Best(mo, -1); correct && !measured {
				missing[u.Task+"\x00"+name] = true
			}
		}
		t.Fast0, t.Fast1 = metrics.FastP(us, 0, mo), metrics.FastP(us, 1, mo)
		t.CI0, t.CI1 = metrics.FastPCI(us, 0, mo), metrics.FastPCI(us, 1, mo)
		t.GeoMean, t.GeoN = metrics.GeoMean(us, mo)
		t.GeoCI = metrics.GeoMeanCI(us, mo)
		t.Classes = metrics.Classes(metrics.RowsOf(us), mo)
		t.Fast0Flagged, t.Fast1Flagged = metrics.FastP(us, 0, mo.Flagged()), metrics.FastP(us, 1, mo.Flagged())
		t.AnyFlagged = metrics.AnyFlagged(us)
		rep.Arms = append(rep.Arms, t)

		levels, byLevel := metrics.Group(us, func(u *metrics.Unit) string { return strconv.Itoa(u.Level) })
		sort.Slice(levels, func(i, j int) bool { a, _ := strconv.Atoi(levels[i]); b, _ := strconv.Atoi(levels[j]); return a < b })
		for _, l := range levels {
			lu := byLevel[l]
			g, _ := metrics.GeoMean(lu, mo)
			rep.Levels = append(rep.Levels, LevelRow{Arm: name, Level: lu[0].Level, Tasks: len(lu),
				Fast0: metrics.FastP(lu, 0, mo), Fast1: metrics.FastP(lu, 1, mo), GeoMean: g})
		}

		most := 0
		for _, u := range us {
			n := 0
			for _, r := range u.Rows {
				if r.Judged() {
					n++
				}
			}
			most = max(most, n)
		}
		ks := opt.K
		if len(ks) == 0 {
			for _, k := range []int{1, 5, 10} {
				if k <= most {
					ks = append(ks, k)
				}
			}
		}
		if most > 1 {
			for _, k := range ks {
				rep.AtK = append(rep.AtK, AtKRow{Arm: name, K: k, Fast0: metrics.FastPAtK(us, 0, k, mo), Fast1: metrics.FastPAtK(us, 1, k, mo),
					Fast0Flagged: metrics.FastPAtK(us, 0, k, mo.Flagged()), Fast1Flagged: metrics.FastPAtK(us, 1, k, mo.Flagged())})
			}
		}
		if mt := metrics.MaxTurn(us); mt > 0 {
			for turn := 0; turn <= mt; turn++ {
				rep.Turns = append(rep.Turns, TurnRow{Arm: name, Turn: turn,
					Fast0: metrics.FastPAtTurn(us, 0, turn, mo), Fast1: metrics.FastPAtTurn(us, 1, turn, mo)})
			}
		}
	}
	rep.Missing = len(missing)
	return rep
}

// Units are the report's units (for plots).
func (r *Report) Units() []*metrics.Unit { return r.units }

// pLabel writes p as the paper does: fast_0, fast_0.5, fast_1.
func pLabel(p float64) string { return "fast_" + strconv.FormatFloat(p, 'f', -1, 64) }

// ParseP reads a comma-separated grid of p.
func ParseP(list []string) ([]float64, error) {
	var out []float64
	for _, s := range list {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("p %q: want a number ≥ 0 (speedup over the baseline)", s)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	sort.Float64s(out)
	return out, nil
}
