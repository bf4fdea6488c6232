package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/internal/contract"
	"github.com/kbplatform/kbplatform/internal/metrics"
	"github.com/kbplatform/kbplatform/internal/report"
)

// studyReportCmd prints a study's paper-style tables, writes its plots, or compares kernels
// across machines.
func (a *app) studyReportCmd() *cobra.Command {
	var ps, excludeFlags, compare []string
	var ks []int
	var baseline, plots string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "report ID [--p 0,1,2] [--baseline MODE] [--plots DIR] | report --compare ID[,ID...]",
		Short: "A study's fast_p, fast_p@k, fast_p@N, speedups, error classes and plots; --compare: the same kernels on several machines",
		Long: `Print a study's tables: fast_p over a grid of p per arm (model + backend + strategy @ target)
with 95% bootstrap intervals, per level, the outcome of every attempt by class, fast_p@k over
each task's attempts (unbiased estimator) and fast_p@N by refinement turn. Speedups are against
eager, or with --baseline against a torch.compile mode timed on the same hardware
(kbplatform baseline). --plots DIR writes the figures as PNG and SVG.

--compare ID,ID puts two (or more) studies' kernels side by side, one column per study and its
machine: per kernel the verdict and speedup on each, fast_p per side, and the kernels whose
verdict or speedup over the baseline flips. --compare ID alone splits one study by the hardware
its evaluations ran on.`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(compare) > 0 && len(args) > 0:
				return fmt.Errorf("give the studies to --compare, or one study as an argument, not both")
			case len(compare) == 0 && len(args) != 1:
				return fmt.Errorf("report needs one study id (or --compare ID,ID)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			known := append(slices.Clone(contract.BaselineModes), "cudagraphs")
			if !slices.Contains(known, baseline) {
				return fmt.Errorf("unknown baseline %q (known: %s)", baseline, strings.Join(known, ", "))
			}
			grid, err := report.ParseP(ps)
			if err != nil {
				return err
			}
			for _, k := range ks {
				if k < 1 {
					return fmt.Errorf("k %d: want a number of attempts ≥ 1", k)
				}
			}
			mo := metrics.Options{Baseline: baseline, ExcludeFlags: excludeFlags}
			st, reg, err := a.readWithRegistry()
			if err != nil {
				return err
			}
			defer st.Close()
			lopt := report.LoadOptions{Level: func(task string) int {
				if t, err := reg.Get(task); err == nil {
					return t.Meta.Level
				}
				return 0
			}}
			if len(compare) > 0 {
				var studies []*report.Study
				for _, id := range compare {
					s, err := report.Load(st, strings.TrimSpace(id), lopt)
					if err != nil {
						return err
					}
					studies = append(studies, s)
				}
				c, err := report.Compare(studies, mo)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(a.out, c)
				}
				return c.WriteText(a.out)
			}
			s, err := report.Load(st, args[0], lopt)
			if err != nil {
				return err
			}
			rep := report.Build(s, report.Options{P: grid, K: ks, Metrics: mo})
			if asJSON {
				if err := printJSON(a.out, rep); err != nil {
					return err
				}
			} else if err := rep.WriteText(a.out); err != nil {
				return err
			}
			if plots != "" {
				files, err := rep.WritePlots(plots)
				if err != nil {
					return err
				}
				a.progress("wrote %d plots: %s", len(files), strings.Join(files, ", "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&ps, "p", []string{"0", "0.5", "0.8", "1", "1.5", "2", "3", "4"}, "the p of fast_p (speedup over the baseline)")
	f.IntSliceVar(&ks, "k", nil, "the k of fast_p@k (default 1, 5, 10 up to the most attempts a task had)")
	f.StringVar(&baseline, "baseline", metrics.Eager, "speedups against eager or a torch.compile mode (compile-default, reduce-overhead, max-autotune, ...)")
	f.StringSliceVar(&excludeFlags, "exclude-flag", nil, "count results with this flag as incorrect too (repeatable: timing_unresolved, gpu_shared; a kernel flag such as no_custom_kernel is never a solution)")
	f.StringVar(&plots, "plots", "", "write the plots (PNG and SVG) into this folder")
	f.StringSliceVar(&compare, "compare", nil, "studies whose kernels to put side by side per machine (one study: split by its hardware)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
