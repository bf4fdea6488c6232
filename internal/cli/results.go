package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/internal/store"
)

func (a *app) resultsCmd() *cobra.Command {
	cmd := groupCmd("results", "List and show stored evaluations")
	cmd.AddCommand(a.resultsListCmd(), a.resultsShowCmd(), a.resultsCostCmd())
	return cmd
}

func (a *app) resultsListCmd() *cobra.Command {
	var f store.EvalFilter
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List evaluations, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.readStore()
			if err != nil {
				return err
			}
			defer st.Close()
			evs, err := st.Evaluations(f)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.out, evs)
			}
			tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tWHEN (UTC)\tTASK\tKERNEL\tDEVICE\tVERDICT\tSPEEDUP")
			for _, ev := range evs {
				r := ev.Result
				speed := "-"
				if r.Timing != nil {
					speed = fmt.Sprintf("%.2fx", r.Timing.Speedup)
				}
				verdict := strings.ToUpper(r.Verdict)
				if r.ErrorClass != "" {
					verdict += " " + r.ErrorClass
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ev.ID[:12], r.FinishedAt.Format("2006-01-02 15:04:05"), r.Task.ID, trimName(r.Kernel.Name), r.Device, verdict, speed)
			}
			tw.Flush()
			fmt.Fprintf(a.out, "%d evaluations in %s\n", len(evs), st.Dir())
			return nil
		},
	}
	cmd.Flags().StringVar(&f.Task, "task", "", "only this task id")
	cmd.Flags().StringVar(&f.Kernel, "kernel", "", "only this kernel hash (or prefix)")
	cmd.Flags().StringVar(&f.Verdict, "verdict", "", "pass, fail, error, or an error class")
	cmd.Flags().IntVar(&f.Limit, "limit", 50, "at most this many (0: all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) resultsShowCmd() *cobra.Command {
	var asJSON, showLog bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one evaluation (an id prefix is enough)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.readStore()
			if err != nil {
				return err
			}
			defer st.Close()
			ev, err := st.Evaluation(args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.out, ev)
			}
			renderVerdict(a.out, ev)
			r := ev.Result
			if len(r.Trials) > 0 {
				fmt.Fprintln(a.out, "trials")
				for i, t := range r.Trials {
					status := "ok"
					if !t.OK {
						status = "WRONG " + firstLines(t.Message, 1, 120)[0]
					}
					fmt.Fprintf(a.out, "  %2d  %-8s seed %-10d %s\n", i+1, t.Dist, t.Seed, status)
				}
			}
			if m := r.Mismatch; m != nil && m.Detail != nil {
				fmt.Fprintln(a.out, "mismatch detail")
				for _, k := range []string{"wrong", "total", "wrong_fraction", "max_abs_err", "mean_abs_err", "max_rel_err", "mean_rel_err", "first_wrong_index", "first_wrong_out", "first_wrong_ref", "out_nonfinite"} {
					if v, ok := m.Detail[k]; ok {
						fmt.Fprintf(a.out, "  %-18s %v\n", k, v)
					}
				}
				if p, ok := m.Detail["pattern"].(map[string]any); ok {
					fmt.Fprintf(a.out, "  %-18s %v\n", "pattern", p["summary"])
				}
			}
			fmt.Fprintf(a.out, "platform  %s\n", ev.Platform)
			fmt.Fprintf(a.out, "contract  %s, seed %d, %d seeds, %d timed calls, %d warm-up\n", r.Contract, r.Config.Seed, r.Config.Seeds, r.Config.TimedCalls, r.Config.Warmup)
			if showLog && r.Log != "" {
				fmt.Fprintf(a.out, "log (candidate's stdout/stderr)\n%s\n", r.Log)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the full record as JSON")
	cmd.Flags().BoolVar(&showLog, "log", false, "include the candidate's captured output")
	return cmd
}
