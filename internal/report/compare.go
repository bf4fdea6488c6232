package report

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/kbplatform/kbplatform/internal/metrics"
)

// Side is one column of a portability comparison: a study, or one hardware of a study that ran
// on several.
type Side struct {
	Letter   string `json:"letter"`
	Study    string `json:"study"`
	Hardware string `json:"hardware"`
	rows     []metrics.Row
}

// Cell is what one side says about one kernel.
type Cell struct {
	Present  bool    `json:"present"`
	Category string  `json:"category,omitempty"` // metrics.Category: pass, compile, mismatch, …
	Speedup  float64 `json:"speedup,omitempty"`
}

// KernelRow is one kernel of a task on every side.
type KernelRow struct {
	Task   string `json:"task"`
	Kernel string `json:"kernel"`
	Cells  []Cell `json:"cells"`
	// Flip says how the kernel's standing changes between sides: "verdict" (passes on some, not
	// on others) or "speedup" (faster than the baseline on some, not on others); empty if none.
	Flip string `json:"flip,omitempty"`
}

// SideSummary is fast_p on one side.
type SideSummary struct {
	Letter  string       `json:"letter"`
	Tasks   int          `json:"tasks"`
	Fast0   metrics.Rate `json:"fast_0"`
	Fast1   metrics.Rate `json:"fast_1"`
	Fast2   metrics.Rate `json:"fast_2"`
	GeoMean float64      `json:"geomean_speedup"`
}

// Comparison puts the same kernels side by side on several machines (the KernelBench paper's
// cross-hardware table).
type Comparison struct {
	Baseline string        `json:"baseline"`
	Sides    []Side        `json:"sides"`
	Kernels  []KernelRow   `json:"kernels"`
	Summary  []SideSummary `json:"summary"`
	// BestChanges lists tasks whose fastest correct kernel is not the same on every side.
	BestChanges []string `json:"best_changes,omitempty"`
}

// Compare builds the comparison: one side per study, or, given one study, one per hardware it
// ran on.
func Compare(studies []*Study, o metrics.Options) (*Comparison, error) {
	if o.Baseline == "" {
		o.Baseline = metrics.Eager
	}
	var sides []Side
	if len(studies) == 1 {
		s := studies[0]
		by := map[string][]metrics.Row{}
		var hw []string
		for _, r := range s.Rows() {
			if r.Hardware == "" {
				continue // a generation failure ran nowhere
			}
			if _, ok := by[r.Hardware]; !ok {
				hw = append(hw, r.Hardware)
			}
			by[r.Hardware] = append(by[r.Hardware], r)
		}
		if len(hw) < 2 {
			return nil, fmt.Errorf("study %s ran on one machine only (%s): compare two studies (--compare ID,ID), e.g. this one and its kernels replayed on another target", s.ID, strings.Join(hw, ""))
		}
		sort.Strings(hw)
		for _, h := range hw {
			sides = append(sides, Side{Study: s.ID, Hardware: h, rows: by[h]})
		}
	} else {
		for _, s := range studies {
			side := Side{Study: s.ID}
			var hw []string
			for _, r := range s.Rows() {
				side.rows = append(side.rows, r)
				if r.Hardware != "" && !contains(hw, r.Hardware) {
					hw = append(hw, r.Hardware)
				}
			}
			sort.Strings(hw)
			side.Hardware = strings.Join(hw, " + ")
			sides = append(sides, side)
		}
	}
	for i := range sides {
		sides[i].Letter = string(rune('A' + i))
	}
	c := &Comparison{Baseline: o.Baseline, Sides: sides}

	// A kernel's cells say how it fared on each machine, a kernel flag or not: a flagged kernel
	// that is faster on one side only is a flip all the same. The summary's fast_p counts
	// solutions (o) only.
	ko := o.Flagged()
	type key struct{ task, kernel string }
	var keys []key
	cells := map[key][]Cell{}
	for i, sd := range sides {
		for _, r := range sd.rows {
			if r.Kernel == "" || !r.Judged() {
				continue
			}
			k := key{r.Task, r.Kernel}
			if _, ok := cells[k]; !ok {
				keys = append(keys, k)
				cells[k] = make([]Cell, len(sides))
			}
			cell := Cell{Present: true, Category: metrics.Category(r, ko)}
			if cell.Category == metrics.CatPass {
				cell.Speedup, _ = speedupOf(r, ko)
			}
			// A kernel judged more than once on a side: its best showing there.
			if old := cells[k][i]; !old.Present || better(cell, old) {
				cells[k][i] = cell
			}
		}
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].task != keys[b].task {
			return keys[a].task < keys[b].task
		}
		return keys[a].kernel < keys[b].kernel
	})
	best := map[string][]string{} // task → best kernel per side
	bestSpeed := map[string][]float64{}
	for _, k := range keys {
		row := KernelRow{Task: k.task, Kernel: k.kernel, Cells: cells[k]}
		row.Flip = flip(row.Cells)
		c.Kernels = append(c.Kernels, row)
		if best[k.task] == nil {
			best[k.task], bestSpeed[k.task] = make([]string, len(sides)), make([]float64, len(sides))
		}
		for i, cell := range row.Cells {
			if cell.Category == metrics.CatPass && cell.Speedup > bestSpeed[k.task][i] {
				best[k.task][i], bestSpeed[k.task][i] = k.kernel, cell.Speedup
			}
		}
	}
	var tasks []string
	for t := range best {
		tasks = append(tasks, t)
	}
	sort.Strings(tasks)
	for _, t := range tasks {
		b := best[t]
		for _, k := range b[1:] {
			if k != b[0] && k != "" && b[0] != "" {
				c.BestChanges = append(c.BestChanges, t)
				break
			}
		}
	}
	for _, sd := range sides {
		units := metrics.Units(sd.rows)
		g, _ := metrics.GeoMean(units, o)
		c.Summary = append(c.Summary, SideSummary{Letter: sd.Letter, Tasks: len(units), Fast0: metrics.FastP(units, 0, o),
			Fast1: metrics.FastP(units, 1, o), Fast2: metrics.FastP(units, 2, o), GeoMean: g})
	}
	return c, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func speedupOf(r metrics.Row, o metrics.Options) (float64, bool) {
	if o.Baseline == metrics.Eager {
		return r.Speedup, true
	}
	v, ok := r.Versus[o.Baseline]
	return v, ok
}

func better(a, b Cell) bool {
	if (a.Category == metrics.CatPass) != (b.Category == metrics.CatPass) {
		return a.Category == metrics.CatPass
	}
	return a.Speedup > b.Speedup
}

// flip compares the sides where the kernel was judged.
func flip(cells []Cell) string {
	var pass, notPass, fast, slow int
	for _, c := range cells {
		if !c.Present {
			continue
		}
		if c.Category != metrics.CatPass {
			notPass++
			continue
		}
		pass++
		switch {
		case c.Speedup > 1:
			fast++
		case c.Speedup > 0:
			slow++
		}
	}
	switch {
	case pass > 0 && notPass > 0:
		return "verdict"
	case fast > 0 && slow > 0:
		return "speedup"
	}
	return ""
}

// WriteText prints the comparison.
func (c *Comparison) WriteText(out io.Writer) error {
	var w bytes.Buffer
	fmt.Fprintf(&w, "the same kernels on %d sides; speedups against %s\n", len(c.Sides), c.Baseline)
	for _, s := range c.Sides {
		fmt.Fprintf(&w, "  %s = %s (study %s)\n", s.Letter, s.Hardware, s.Study)
	}
	fmt.Fprintln(&w)
	tw := tabwriter.NewWriter(&w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "TASK\tKERNEL\t")
	for _, s := range c.Sides {
		fmt.Fprintf(tw, "%s\t", s.Letter)
	}
	fmt.Fprintln(tw, "FLIP")
	flips := 0
	for _, k := range c.Kernels {
		fmt.Fprintf(tw, "%s\t%s\t", k.Task, k.Kernel[:min(12, len(k.Kernel))])
		for _, cell := range k.Cells {
			fmt.Fprintf(tw, "%s\t", cellText(cell))
		}
		f := "-"
		switch k.Flip {
		case "verdict":
			f = "passes on " + c.letters(k.Cells, func(x Cell) bool { return x.Category == metrics.CatPass }) + " only"
		case "speedup":
			f = "faster on " + c.letters(k.Cells, func(x Cell) bool { return x.Category == metrics.CatPass && x.Speedup > 1 }) + " only"
		}
		if k.Flip != "" {
			flips++
		}
		fmt.Fprintln(tw, f)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(&w)
	tw = tabwriter.NewWriter(&w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SIDE\tTASKS\tfast_0\tfast_1\tfast_2\tGEOMEAN")
	for _, s := range c.Summary {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t%s\n", s.Letter, tasks(s.Fast0.N, s.Tasks), s.Fast0.Value, s.Fast1.Value, s.Fast2.Value, geo(s.GeoMean, 1))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&w, "\n%d of %d kernels flip between sides", flips, len(c.Kernels))
	if len(c.BestChanges) > 0 {
		fmt.Fprintf(&w, "; the fastest correct kernel differs for %s", strings.Join(c.BestChanges, ", "))
	}
	fmt.Fprintln(&w)
	_, err := out.Write(trimLines(w.Bytes()))
	return err
}

func (c *Comparison) letters(cells []Cell, ok func(Cell) bool) string {
	var out []string
	for i, x := range cells {
		if x.Present && ok(x) {
			out = append(out, c.Sides[i].Letter)
		}
	}
	return strings.Join(out, ",")
}

func cellText(c Cell) string {
	switch {
	case !c.Present:
		return "-"
	case c.Category == metrics.CatPass && c.Speedup > 0:
		return fmt.Sprintf("pass %.2fx", c.Speedup)
	case c.Category == metrics.CatPass:
		return "pass (no baseline)"
	}
	return c.Category
}
