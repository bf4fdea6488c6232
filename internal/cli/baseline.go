package cli

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/internal/contract"
	"github.com/kbplatform/kbplatform/internal/placement"
	"github.com/kbplatform/kbplatform/internal/record"
	"github.com/kbplatform/kbplatform/internal/registry"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

func (a *app) baselineCmd() *cobra.Command {
	var taskIDs []string
	var level int
	var origin string
	var modes []string
	var asJSON, missing bool
	cmd := &cobra.Command{
		Use:   "baseline [--task ID... | --origin NAME] [--level N] [--modes eager,compile-default,...] [--missing]",
		Short: "Time tasks in eager mode and the torch.compile modes, per platform",
		Long: `Time each task's own Model in eager mode and in torch.compile's modes (default,
reduce-overhead, max-autotune, max-autotune-no-cudagraphs; also cudagraphs), each checked for
correctness against eager and timed the same way as candidates. Compile time is excluded from
timing and shown apart (COMPILE s): the compiling first call runs before any trial, under
--compile-timeout. SPEEDUP is the eager median over the mode's median (above 1: the mode is
faster), as for kernels. The eager row is an A/A measurement: eager against eager, whose ratio
shows the platform's timing noise. Results are stored per task, size, platform fingerprint and mode.
With --missing, only the pairs with no stored verdict on this platform under the current contract
are timed: a run that was cut short picks up where it stopped. On the CPU, a task that would not
fit in memory_share of the host's memory is refused before anything runs (REFUSED) and the
others are timed.
Exit status 3 means a mode failed its verdict (it computes something else); 4 means a timing got
no verdict because the task, the platform or the environment failed (as for eval), or a task was
refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, reg, err := a.openWithRegistry()
			if err != nil {
				return err
			}
			defer st.Close()
			var list []*registry.Task
			for _, id := range taskIDs {
				t, err := reg.Get(id)
				if err != nil {
					return err
				}
				list = append(list, t)
			}
			if len(taskIDs) == 0 {
				list = reg.List(registry.Filter{Level: level, Origin: origin})
				if len(list) == 0 {
					return fmt.Errorf("no tasks of origin %q%s (kbplatform tasks list shows them; tasks import kernelbench adds KernelBench's)", origin, levelNote(level))
				}
			}
			for _, m := range modes {
				if !validMode(m) {
					return fmt.Errorf("unknown mode %q (known: %s, cudagraphs)", m, strings.Join(contract.BaselineModes, ", "))
				}
			}
			pm := a.pluginManager()
			defer pm.Close()
			target, hw, err := a.target(pm)
			if err != nil {
				return err
			}
			devices, err := a.pickDevices(hw)
			if err != nil {
				return err
			}
			device := devices[0] // all of one kind: sizes are picked for it
			var cts []sdk.Task
			for _, t := range list {
				ct, err := t.Contract(t.PickSize(a.cfg.Size, device))
				if err != nil {
					return err
				}
				cts = append(cts, ct)
			}
			// A task that cannot fit this machine is refused before anything runs and the others are
			// timed: one task too big for the host must not cost a study the whole origin.
			refused := map[string]string{}
			if g := a.guardMemory(device, cts); g != nil {
				for i, ct := range cts {
					if why := g.refuse(ct, list[i]); why != "" {
						refused[list[i].ID] = why
					}
				}
			}
			if len(refused) == len(list) {
				return fmt.Errorf("refused, nothing was run: %s", refused[list[0].ID])
			}
			progress := a.progressSince(time.Now())
			out := []store.Baseline{} // printed as [] when nothing was timed (--missing)
			tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
			if !asJSON {
				fmt.Fprintln(tw, "TASK\tSIZE\tMODE\tMEDIAN ms\tCV\tEAGER ms\tSPEEDUP\tCOMPILE s\tSTATUS")
			}
			var items []baselineItem
			for _, t := range list {
				if why := refused[t.ID]; why != "" {
					if !asJSON {
						fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\t-\tREFUSED: %s\n", t.ID, t.PickSize(a.cfg.Size, device), strings.Join(modes, ","), why)
					} else {
						a.progress("refused %s: %s", t.ID, why)
					}
					continue
				}
				size := t.PickSize(a.cfg.Size, device)
				ct, err := t.Contract(size)
				if err != nil {
					return err
				}
				for _, mode := range modes {
					items = append(items, baselineItem{task: t, size: size, ct: ct, mode: mode})
				}
			}
			if missing {
				total := len(items)
				keep, why, err := missingBaselines(st, items, device, hw)
				if err != nil {
					return err
				}
				if why != "" {
					a.progress("--missing: %s; timing all %d", why, total)
				} else {
					a.progress("--missing: %d of %d already timed on this platform under %s; timing %d", total-len(keep), total, contract.Version, len(keep))
				}
				items = keep
			}
			rec := a.recorder(st, target)
			var failed, noVerdict int
			measured, err := a.measureBaselines(target.Target(), devices, items, progress)
			if err != nil {
				return err
			}
			for i, it := range items {
				t, size, ct, mode := it.task, it.size, it.ct, it.mode
				m := <-measured[i]
				res, err, device := m.res, m.err, m.device
				ev, err := rec.Record(a.ctx, record.Attempt{Task: ct, Device: device, Config: a.cfg.Contract, Result: res, Err: err})
				if errors.Is(err, record.ErrInterrupted) {
					tw.Flush()
					return exitError{code: exitInterrupted, msg: "interrupted; baselines measured so far are stored"}
				}
				if err != nil {
					return err
				}
				res = ev.Result
				b := store.Baseline{TaskID: t.ID, TaskHash: ct.Hash, Size: size, Mode: mode, Device: device, Evaluation: ev.ID,
					Fingerprint: res.Fingerprint, Platform: ev.Platform, Verdict: res.Verdict, Contract: res.Contract, MeasuredAt: res.FinishedAt}
				if res.Verdict == contract.Pass && res.Timing != nil {
					b.Stats = &res.Timing.Candidate
					b.Eager = &res.Timing.Reference
					b.Speedup = res.Timing.Speedup
					b.CompileS = res.ModelCompileS
					b.Unresolved = res.FlagReason(sdk.FlagTimingUnresolved)
					// A CPU baseline timed without its turn at the CPUs is as shared as a GPU one.
					b.Shared = cmp.Or(res.FlagReason(sdk.FlagGPUShared), res.FlagReason(sdk.FlagCPUShared))
				} else {
					b.Error = res.ErrorClass + ": " + firstLines(res.Message, 1, 300)[0]
				}
				switch ev.Blame {
				case "":
				case record.BlameKernel:
					failed++
				default:
					noVerdict++
				}
				if err := st.PutBaseline(b); err != nil {
					return err
				}
				out = append(out, b)
				if !asJSON {
					if b.Stats != nil {
						status := "ok"
						switch {
						case b.Shared != "":
							status = "shared" // timed beside a program outside kbplatform: see the record's flag
						case b.Unresolved != "":
							status = "unresolved" // the speedup is not pinned down: see the record's flag
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%.4f\t%.1f%%\t%.4f\t%.3fx\t%s\t%s\n", t.ID, size, mode, b.Stats.Median, 100*b.Stats.CV, b.Eager.Median, b.Speedup, compileSeconds(b.CompileS), status)
					} else {
						fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\t-\t%s\n", t.ID, size, mode, b.Error)
					}
				}
			}
			if asJSON {
				if err := printJSON(a.out, out); err != nil {
					return err
				}
			} else if err := tw.Flush(); err != nil {
				return err
			}
			if err := verdictExit(failed, noVerdict, len(out), "baselines"); err != nil || len(refused) == 0 {
				return err
			}
			// The message names them: with --json -q it is the only place a refusal shows.
			ids := slices.Sorted(maps.Keys(refused))
			return exitError{code: exitNoVerdict, msg: fmt.Sprintf("%d of %d tasks refused: they need more memory than this machine allows (%s)", len(refused), len(list), strings.Join(ids, ", "))}
		},
	}
	cmd.Flags().StringArrayVar(&taskIDs, "task", nil, "task id (repeatable; default: every task of --origin)")
	cmd.Flags().StringVar(&origin, "origin", registry.OriginSuite, "the tasks to time when no --task is given: suite, kernelbench (once imported) or another import's name")
	cmd.Flags().IntVar(&level, "level", 0, "only tasks of this level")
	cmd.Flags().StringSliceVar(&modes, "modes", contract.BaselineModes, "modes to time")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&missing, "missing", false, "time only what has no stored verdict on this platform under the current contract (resume a run cut short)")
	addContractFlags(cmd)
	return cmd
}

func validMode(m string) bool {
	if m == "cudagraphs" {
		return true
	}
	for _, k := range contract.BaselineModes {
		if k == m {
			return true
		}
	}
	return false
}

// compileSeconds shows a compile time; eager has none.
func compileSeconds(s float64) string {
	if s == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", s)
}

// baselineItem is one mode of one task to time.
type baselineItem struct {
	task *registry.Task
	size string
	ct   sdk.Task
	mode string
}

// baselineRun is a timed baseline and the device it ran on.
type baselineRun struct {
	res    *sdk.Result
	err    error
	device string
}

// measureBaselines times the items over the devices, one timing per device at a time, a task's
// modes going back to the device that holds its reference; each item's result arrives on its own
// channel, so that the caller records them in order.
func (a *app) measureBaselines(tg sdk.Target, devices []string, items []baselineItem, progress sdk.Progress) ([]chan baselineRun, error) {
	sched, err := placement.New(devices)
	if err != nil {
		return nil, err
	}
	out := make([]chan baselineRun, len(items))
	for i := range out {
		out[i] = make(chan baselineRun, 1)
	}
	window := make(chan struct{}, 2*len(devices)) // the waiting ones a freed device chooses from
	go func() {
		for i, it := range items {
			select {
			case window <- struct{}{}:
			case <-a.ctx.Done():
				out[i] <- baselineRun{err: a.ctx.Err(), device: devices[0]}
				continue
			}
			ticket := sched.Request(it.ct.ID + "\x00" + it.size)
			go func() {
				defer func() { <-window }()
				dev, release, err := ticket.Wait(a.ctx)
				if err != nil {
					out[i] <- baselineRun{err: err, device: devices[0]}
					return
				}
				defer release()
				on := ""
				if len(devices) > 1 {
					on = " on " + dev
				}
				a.progress("[%d/%d] %s (%s) %s%s", i+1, len(items), it.task.ID, it.size, it.mode, on)
				res, err := tg.Baseline(a.ctx, sdk.BaselineRequest{Task: it.ct, Device: dev, Mode: it.mode, Config: a.cfg.Contract}, progress)
				out[i] <- baselineRun{res: res, err: err, device: dev}
			}()
		}
	}()
	return out, nil
}

// levelNote is " at level N" when a level was asked for.
func levelNote(level int) string {
	if level == 0 {
		return ""
	}
	return fmt.Sprintf(" at level %d", level)
}
