package report

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kbplatform/kbplatform/internal/metrics"
	"github.com/kbplatform/kbplatform/sdk"
)

// WriteText prints the report's tables.
func (r *Report) WriteText(out io.Writer) error {
	var b bytes.Buffer
	if err := r.writeText(&b); err != nil {
		return err
	}
	_, err := out.Write(trimLines(b.Bytes()))
	return err
}

// trimLines drops the spaces tabwriter leaves at the end of lines.
func trimLines(b []byte) []byte {
	lines := bytes.Split(b, []byte("\n"))
	for i, l := range lines {
		lines[i] = bytes.TrimRight(l, " ")
	}
	return bytes.Join(lines, []byte("\n"))
}

func (r *Report) writeText(w io.Writer) error {
	title := r.Study
	if r.Name != "" {
		title += " (" + r.Name + ")"
	}
	fmt.Fprintf(w, "study %s: %d attempts, %d arm(s); speedups against %s\n", title, r.Attempts, len(r.Arms), r.Baseline)
	if len(r.ExcludeFlags) > 0 {
		fmt.Fprintf(w, "results flagged %s count as incorrect\n", strings.Join(r.ExcludeFlags, ", "))
	}
	if len(r.Hardware) > 1 {
		fmt.Fprintf(w, "ran on %d kinds of hardware (%s): these tables pool them; study report --compare %s splits them\n",
			len(r.Hardware), strings.Join(r.Hardware, "; "), r.Study)
	}
	if len(r.Arms) == 0 {
		_, err := fmt.Fprintln(w, "no attempts recorded yet")
		return err
	}

	fmt.Fprintf(w, "\nfast_p: fraction of tasks with a correct kernel more than p times faster than %s\n", r.Baseline)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "ARM\tTASKS\t")
	for _, p := range r.P {
		fmt.Fprintf(tw, "%s\t", pLabel(p))
	}
	fmt.Fprintln(tw, "GEOMEAN\t")
	for _, a := range r.Arms {
		fmt.Fprintf(tw, "%s\t%s\t", a.Arm, tasks(a.Judged, a.Tasks))
		for _, f := range a.FastP {
			fmt.Fprintf(tw, "%.2f\t", f.Value)
		}
		fmt.Fprintf(tw, "%s\t\n", geo(a.GeoMean, a.GeoN))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if err := r.writeFlagged(w); err != nil {
		return err
	}

	fmt.Fprintln(w, "\n95% bootstrap intervals (1000 resamples of the tasks)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ARM\tfast_0\tfast_1\tGEOMEAN\t")
	for _, a := range r.Arms {
		fmt.Fprintf(tw, "%s\t%.2f [%.2f, %.2f]\t%.2f [%.2f, %.2f]\t%s\t\n", a.Arm,
			a.Fast0.Value, a.CI0.Lo, a.CI0.Hi, a.Fast1.Value, a.CI1.Lo, a.CI1.Hi, geoCI(a))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nby level")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ARM\tLEVEL\tTASKS\tfast_0\tfast_1\tGEOMEAN\t")
	for _, l := range r.Levels {
		level := "?"
		if l.Level > 0 {
			level = fmt.Sprint(l.Level)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.2f\t%s\t\n", l.Arm, level, tasks(l.Fast0.N, l.Tasks), l.Fast0.Value, l.Fast1.Value, geo(l.GeoMean, 1))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\noutcomes of every attempt")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "ARM\tATTEMPTS\t")
	for _, c := range metrics.Categories {
		fmt.Fprintf(tw, "%s\t", c)
	}
	fmt.Fprintln(tw)
	for _, a := range r.Arms {
		fmt.Fprintf(tw, "%s\t%d\t", a.Arm, a.Classes.Attempts)
		for _, c := range metrics.Categories {
			fmt.Fprintf(tw, "%d\t", a.Classes.Count[c])
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(r.AtK) > 0 {
		fmt.Fprintln(w, "\nfast_p@k: chance that k of a task's attempts hold a success (unbiased estimator), mean over tasks")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ARM\tK\tfast_0@k\tfast_1@k\tTASKS WITH FEWER THAN K\t")
		for _, k := range r.AtK {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t\n", k.Arm, k.K, withFlagged(k.Fast0, k.Fast0Flagged), withFlagged(k.Fast1, k.Fast1Flagged), k.Fast0.Short)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Turns) > 0 {
		fmt.Fprintln(w, "\nfast_p@N: counting the attempts of turns 0..N only")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ARM\tTURN\tfast_0@N\tfast_1@N\t")
		for _, t := range r.Turns {
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t\n", t.Arm, t.Turn, t.Fast0.Value, t.Fast1.Value)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if r.Missing > 0 {
		fmt.Fprintf(w, "\n%d task(s) have a correct kernel but no %s baseline timed on the same hardware: they are left out of every fast_p with p > 0 and of the geometric mean (time it there: kbplatform baseline --task ID --modes %s)\n",
			r.Missing, r.Baseline, r.Baseline)
	}
	return nil
}

// writeFlagged says, for the arms where some pass carries a kernel flag, what fast_0 and fast_1
// would read counting such passes: the tables count them as no solution.
func (r *Report) writeFlagged(w io.Writer) error {
	var arms []ArmTable
	for _, a := range r.Arms {
		if a.AnyFlagged {
			arms = append(arms, a)
		}
	}
	if len(arms) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\na pass carrying a kernel flag (%s) is no solution; beside each figure, what counting it would give\n", strings.Join(sdk.KernelFlags(), ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ARM\tfast_0\tfast_1\t")
	for _, a := range arms {
		fmt.Fprintf(tw, "%s\t%.2f, %.2f counting flagged\t%.2f, %.2f counting flagged\t\n", a.Arm, a.Fast0.Value, a.Fast0Flagged.Value, a.Fast1.Value, a.Fast1Flagged.Value)
	}
	return tw.Flush()
}

// withFlagged is a rate, and beside it the rate counting flagged passes where that differs.
func withFlagged(r, flagged metrics.Rate) string {
	if flagged.Value == r.Value {
		return fmt.Sprintf("%.2f", r.Value)
	}
	return fmt.Sprintf("%.2f, %.2f counting flagged", r.Value, flagged.Value)
}

func tasks(judged, all int) string {
	if judged == all {
		return fmt.Sprint(all)
	}
	return fmt.Sprintf("%d (+%d no verdict)", judged, all-judged)
}

func geo(v float64, n int) string {
	if n == 0 || v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v)
}

func geoCI(a ArmTable) string {
	if a.GeoN == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx [%.2f, %.2f]", a.GeoMean, a.GeoCI.Lo, a.GeoCI.Hi)
}
