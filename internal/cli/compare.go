package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kbplatform/kbplatform/internal/study"
)

// backendRefs splits a study's backend setting into one plugin reference per backend: "cuda",
// "cuda,triton,cutlass". With several backends, settings (flag or file) are an object keyed by
// backend name, since each backend accepts only its own keys.
func backendRefs(p pluginSetting, cfg json.RawMessage) ([]study.PluginRef, error) {
	var names []string
	for _, n := range strings.Split(p.Name, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	if len(names) <= 1 {
		return []study.PluginRef{p.ref("backend", "cpp", cfg)}, nil
	}
	byName := map[string]json.RawMessage{}
	switch {
	case cfg != nil:
		if err := json.Unmarshal(cfg, &byName); err != nil {
			return nil, fmt.Errorf(`with several backends, --backend-config is an object by backend name ({"cutlass": {...}}): %w`, err)
		}
	case p.Config != nil:
		for k, v := range p.Config {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			byName[k] = b
		}
	}
	seen := map[string]bool{}
	var out []study.PluginRef
	for _, n := range names {
		short := strings.TrimPrefix(n, "backend/")
		if seen[short] {
			return nil, fmt.Errorf("backend %s named twice", short)
		}
		seen[short] = true
		out = append(out, pluginSetting{Name: n}.ref("backend", "", byName[short]))
		delete(byName, short)
	}
	for k := range byName {
		return nil, fmt.Errorf("backend settings for %q, which is not among the backends (%s): with several backends, settings are an object by backend name", k, strings.Join(names, ", "))
	}
	return out, nil
}

// renderComparison prints studies side by side, one column per study (its backend), one row per
// task, then fast_p per column.
func renderComparison(w io.Writer, reps []*study.Report) {
	labels := make([]string, len(reps))
	count := map[string]int{}
	for i, r := range reps {
		labels[i] = strings.TrimPrefix(r.Spec.Backend.Ref, "backend/")
		count[labels[i]]++
	}
	for i, r := range reps {
		if count[labels[i]] > 1 {
			labels[i] += "@" + r.Study[:8]
		}
	}
	var tasks []string
	cells := map[string][]string{}
	for i, r := range reps {
		for _, o := range r.Outcomes {
			if _, ok := cells[o.Task]; !ok {
				tasks = append(tasks, o.Task)
				cells[o.Task] = make([]string, len(reps))
				for j := range cells[o.Task] {
					cells[o.Task][j] = "-"
				}
			}
			cells[o.Task][i] = outcomeCell(o)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "TASK\t%s\n", strings.Join(upper(labels), "\t"))
	for _, t := range tasks {
		fmt.Fprintf(tw, "%s\t%s\n", t, strings.Join(cells[t], "\t"))
	}
	for _, p := range []float64{0, 1, 1.5, 2} {
		row := make([]string, len(reps))
		for i, r := range reps {
			row[i] = fmt.Sprintf("%.2f", study.FastP(r.Outcomes, p, false))
			if study.AnyFlagged(r.Outcomes) {
				row[i] += fmt.Sprintf(", %.2f counting flagged", study.FastP(r.Outcomes, p, true))
			}
		}
		fmt.Fprintf(tw, "fast_%g\t%s\n", p, strings.Join(row, "\t"))
	}
	tw.Flush()
	for i, r := range reps {
		fmt.Fprintf(w, "%s: study %s\n", labels[i], r.Study)
	}
	if len(reps) > 0 && len(reps[0].ExcludeFlags) > 0 {
		fmt.Fprintf(w, "results flagged %s are left out\n", strings.Join(reps[0].ExcludeFlags, ", "))
	}
}

func outcomeCell(o study.TaskOutcome) string {
	switch {
	case o.Correct:
		return fmt.Sprintf("%.2fx", o.BestSpeedup)
	case o.Flagged:
		return fmt.Sprintf("flagged %.2fx", o.FlaggedSpeedup)
	case o.Error != "":
		return "error"
	case !o.Done:
		return "not run"
	}
	return "incorrect"
}

func upper(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToUpper(s)
	}
	return out
}
