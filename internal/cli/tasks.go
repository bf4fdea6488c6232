package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/internal/contract"
	"github.com/kbplatform/kbplatform/internal/registry"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

func taskFromRecord(r store.TaskRecord) (*registry.Task, error) {
	var meta registry.Meta
	b, err := json.Marshal(r.Meta)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, err
	}
	return registry.New(r.ID, r.Origin, r.Path, r.Source, meta)
}

func (a *app) tasksCmd() *cobra.Command {
	cmd := groupCmd("tasks", "List, show, import and validate tasks")
	cmd.AddCommand(a.tasksListCmd(), a.tasksShowCmd(), a.tasksImportCmd(), a.tasksValidateCmd())
	return cmd
}

func (a *app) tasksListCmd() *cobra.Command {
	var level int
	var tag, origin string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tasks (the bundled suite and imported ones)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg, err := a.registryMaybeStore()
			if err != nil {
				return err
			}
			list := reg.List(registry.Filter{Level: level, Tag: tag, Origin: origin})
			if asJSON {
				type row struct {
					ID     string        `json:"id"`
					Origin string        `json:"origin"`
					Level  int           `json:"level"`
					Name   string        `json:"name"`
					Tags   []string      `json:"tags,omitempty"`
					Sizes  []string      `json:"sizes"`
					Meta   registry.Meta `json:"meta"`
				}
				var rows []row
				for _, t := range list {
					rows = append(rows, row{t.ID, t.Origin, t.Meta.Level, t.Title(), t.Meta.Tags, t.Sizes(), t.Meta})
				}
				return printJSON(a.out, rows)
			}
			w := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tLEVEL\tNAME\tDTYPE\tTAGS")
			for _, t := range list {
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", t.ID, t.Meta.Level, t.Title(), t.Meta.Dtype, strings.Join(t.Meta.Tags, ","))
			}
			w.Flush()
			fmt.Fprintf(a.out, "%d tasks\n", len(list))
			return nil
		},
	}
	cmd.Flags().IntVar(&level, "level", 0, "only this level")
	cmd.Flags().StringVar(&tag, "tag", "", "only tasks with this tag")
	cmd.Flags().StringVar(&origin, "origin", "", "suite, kernelbench or file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// registryMaybeStore loads the suite and, if the database can be opened, imported tasks too.
func (a *app) registryMaybeStore() (*registry.Registry, error) {
	st, err := a.readStore()
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return a.registry(st)
}

func (a *app) tasksShowCmd() *cobra.Command {
	var size string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a task's metadata and its source at a size",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, reg, err := a.readWithRegistry()
			if err != nil {
				return err
			}
			defer st.Close()
			t, err := reg.Get(args[0])
			if err != nil {
				return err
			}
			vals, err := st.Validations(t.ID)
			if err != nil {
				return err
			}
			if size == "" || size == "auto" {
				size = t.PickSize("auto", "cpu")
			}
			src, err := t.Render(size)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.out, map[string]any{"id": t.ID, "origin": t.Origin, "path": t.Path, "meta": t.Meta, "sizes": t.Sizes(), "size": size, "source": src, "hash": t.Hash, "validations": vals})
			}
			fmt.Fprintf(a.out, "%s — %s (level %d, %s)\n", t.ID, t.Title(), t.Meta.Level, t.Origin)
			if len(t.Meta.Tags) > 0 {
				fmt.Fprintf(a.out, "tags:          %s\n", strings.Join(t.Meta.Tags, ", "))
			}
			ct, _ := t.Contract(size)
			fmt.Fprintf(a.out, "sizes:         %s (showing %s)\n", strings.Join(t.Sizes(), ", "), size)
			fmt.Fprintf(a.out, "distributions: %s\n", strings.Join(ct.Distributions, ", "))
			if t.Meta.Tolerance != nil {
				fmt.Fprintf(a.out, "tolerance:     atol %g rtol %g\n", t.Meta.Tolerance.Atol, t.Meta.Tolerance.Rtol)
			} else {
				fmt.Fprintf(a.out, "tolerance:     by output dtype (fp32 1e-4, fp16/bf16 1e-2)\n")
			}
			if t.Meta.Notes != "" {
				fmt.Fprintf(a.out, "notes:         %s\n", t.Meta.Notes)
			}
			for _, v := range vals {
				fmt.Fprintf(a.out, "validated:     %s\n", validationLine(t, v))
			}
			if len(vals) == 0 {
				fmt.Fprintf(a.out, "validated:     never (kbplatform tasks validate %s); every evaluation probes the reference under %s itself\n", t.ID, strings.Join(contract.SignProbes, ", "))
			}
			fmt.Fprintf(a.out, "source:        %s\n\n%s", t.Path, src)
			return nil
		},
	}
	cmd.Flags().StringVar(&size, "size", "", "cpu, gpu or default (default: cpu when the task has it)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) tasksImportCmd() *cobra.Command {
	var origin string
	var replace bool
	cmd := &cobra.Command{
		Use:   "import kernelbench PATH [--origin NAME] [--replace]",
		Short: "Import the tasks of a KernelBench checkout (its files stay where they are)",
		Long: `Import the tasks of a KernelBench checkout as kernelbench/lN/NAME (or, with --origin NAME,
as NAME/lN/NAME). Importing the same files again changes nothing. An import that would change
tasks already stored under the same ids (another checkout, edited files) is refused unless
--replace is given; use --origin to keep both.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "kernelbench" {
				return fmt.Errorf("unknown task source %q (supported: kernelbench)", args[0])
			}
			rep, err := registry.ImportKernelBenchAs(args[1], origin)
			if err != nil {
				return err
			}
			st, err := a.openStore()
			if err != nil {
				return err
			}
			defer st.Close()
			old, err := st.Tasks()
			if err != nil {
				return err
			}
			stored := map[string]store.TaskRecord{}
			for _, r := range old {
				stored[r.ID] = r
			}
			now := time.Now().UTC()
			recs := make([]store.TaskRecord, 0, len(rep.Tasks))
			var changed []string
			for _, t := range rep.Tasks {
				if o, ok := stored[t.ID]; ok && o.Hash != t.Hash {
					changed = append(changed, fmt.Sprintf("%s (stored from %s on %s)", t.ID, o.Path, o.ImportedAt.Format("2006-01-02")))
				}
				recs = append(recs, store.TaskRecord{ID: t.ID, Origin: t.Origin, Path: t.Path, Source: t.Source, Hash: t.Hash, Meta: t.Meta, ImportedAt: now})
			}
			if len(changed) > 0 && !replace {
				return fmt.Errorf("this import would change %d stored task(s), e.g. %s; nothing was imported. Pass --replace to overwrite them (their evaluations stay, under the old task hash), or --origin NAME to import beside them",
					len(changed), changed[0])
			}
			if err := st.PutTasks(recs); err != nil {
				return err
			}
			var levels []int
			for l := range rep.PerLevel {
				levels = append(levels, l)
			}
			sort.Ints(levels)
			var parts []string
			for _, l := range levels {
				parts = append(parts, fmt.Sprintf("level %d: %d", l, rep.PerLevel[l]))
			}
			fmt.Fprintf(a.out, "imported %d tasks from %s (%s) into %s\n", len(rep.Tasks), rep.Root, strings.Join(parts, ", "), st.Dir())
			for _, s := range rep.Skipped {
				fmt.Fprintf(a.out, "skipped %s\n", s)
			}
			var bad []string
			for p := range rep.Invalid {
				bad = append(bad, p)
			}
			sort.Strings(bad)
			for _, p := range bad {
				fmt.Fprintf(a.out, "invalid %s: %s\n", p, rep.Invalid[p])
			}
			if len(changed) > 0 {
				fmt.Fprintf(a.out, "replaced %d task(s) whose source changed\n", len(changed))
			}
			fmt.Fprintf(a.out, "run `kbplatform tasks validate --origin %s` to execute their references\n", origin)
			return nil
		},
	}
	cmd.Flags().StringVar(&origin, "origin", registry.OriginKernelBench, "origin, and id prefix, of the imported tasks")
	cmd.Flags().BoolVar(&replace, "replace", false, "overwrite stored tasks whose source differs")
	return cmd
}

func (a *app) tasksValidateCmd() *cobra.Command {
	var level int
	var origin string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "validate [ID...]",
		Short: "Run task references: they must build, run on every distribution, and stay finite",
		RunE: func(cmd *cobra.Command, args []string) error {
			reg, err := a.registryMaybeStore()
			if err != nil {
				return err
			}
			var list []*registry.Task
			if len(args) > 0 {
				for _, id := range args {
					t, err := reg.Get(id)
					if err != nil {
						return err
					}
					list = append(list, t)
				}
			} else {
				list = reg.List(registry.Filter{Level: level, Origin: origin})
			}
			pm := a.pluginManager()
			defer pm.Close()
			target, hw, err := a.target(pm)
			if err != nil {
				return err
			}
			device, err := a.pickDevice(hw)
			if err != nil {
				return err
			}
			cts := make([]sdk.Task, len(list))
			for i, t := range list {
				if cts[i], err = t.Contract(t.PickSize(a.cfg.Size, device)); err != nil {
					return err
				}
			}
			guard := a.guardMemory(device, cts)
			var reports []*contract.Validation
			ran := map[*contract.Validation]bool{}
			var failed, refused, notRun int
			w := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
			if !asJSON {
				fmt.Fprintln(w, "TASK\tSIZE\tSTATUS\tOUTPUT\tNOTES")
			}
			for i, t := range list {
				ct := cts[i]
				rep := &contract.Validation{TaskID: t.ID, Size: ct.Size, Device: device}
				status := ""
				switch why := guard.refuse(ct, t); {
				case a.ctx.Err() != nil:
					status = "not run"
					notRun++
				case why != "":
					status = "REFUSED"
					rep.Errors = []string{why}
					refused++
				default:
					a.progress("[%d/%d] validating %s (%s) on %s", i+1, len(list), t.ID, ct.Size, device)
					got, err := target.Target().Validate(a.ctx, ct, device, a.cfg.Contract)
					switch {
					case a.ctx.Err() != nil:
						// Stopped from outside while it ran: says nothing about the task.
						status = "not run"
						notRun++
					case err != nil:
						rep.Errors = []string{"target: " + err.Error()}
					default:
						rep = got
						ran[rep] = true
					}
				}
				if status == "" {
					status = "ok"
					if !rep.OK {
						status = "FAIL"
						failed++
					}
				}
				rep.Path = t.Path
				if status != "not run" {
					reports = append(reports, rep)
				}
				if !asJSON {
					notes := strings.Join(append(append(append([]string{}, rep.Errors...), probeNotes(rep.Probes)...), rep.Warnings...), "; ")
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.ID, ct.Size, status, rep.Output, notes)
				}
			}
			if err := a.storeValidations(list, cts, reports, ran); err != nil {
				return err
			}
			if asJSON {
				if err := printJSON(a.out, reports); err != nil {
					return err
				}
			} else {
				w.Flush()
				fmt.Fprintf(a.out, "%d tasks: %d ok, %d failed, %d refused, %d not run\n", len(list), len(list)-failed-refused-notRun, failed, refused, notRun)
			}
			switch {
			case notRun > 0:
				return exitError{code: exitInterrupted, msg: fmt.Sprintf("interrupted: %d of %d tasks not run", notRun, len(list))}
			case failed > 0:
				return exitError{code: exitKernelFailed, msg: fmt.Sprintf("%d of %d task references failed validation", failed, len(list))}
			case refused > 0:
				return exitError{code: exitNoVerdict, msg: fmt.Sprintf("%d of %d tasks refused: they need more memory than this machine allows", refused, len(list))}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&level, "level", 0, "only this level")
	cmd.Flags().StringVar(&origin, "origin", "", "suite, kernelbench or file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	addContractFlags(cmd)
	return cmd
}

// storeValidations keeps each validation that ran with its task (`tasks show` prints them).
// Only those the target ran are kept: a task refused for memory, one stopped before it ran and a
// target that failed say nothing about the task.
func (a *app) storeValidations(list []*registry.Task, cts []sdk.Task, reports []*contract.Validation, ran map[*contract.Validation]bool) error {
	byID := map[string]int{}
	for i, t := range list {
		byID[t.ID] = i
	}
	var recs []store.ValidationRecord
	now := time.Now().UTC()
	for _, r := range reports {
		i, ok := byID[r.TaskID]
		if !ok || !ran[r] {
			continue
		}
		recs = append(recs, store.ValidationRecord{TaskID: r.TaskID, TaskHash: cts[i].Hash, Size: r.Size, Device: r.Device, ValidatedAt: now, Validation: *r})
	}
	if len(recs) == 0 {
		return nil
	}
	st, err := a.openStore()
	if err != nil {
		return fmt.Errorf("the validations ran but could not be kept: %w", err)
	}
	defer st.Close()
	for _, rec := range recs {
		if err := st.PutValidation(rec); err != nil {
			return fmt.Errorf("the validations ran but could not be kept: %w", err)
		}
	}
	return nil
}

// validationLine says what a stored validation found: where, when, the verdict and the probed
// distributions, and whether the task changed since.
func validationLine(t *registry.Task, v store.ValidationRecord) string {
	status := "ok"
	if !v.Validation.OK {
		status = "FAIL: " + strings.Join(v.Validation.Errors, "; ")
	}
	parts := append([]string{fmt.Sprintf("%s, size %s, %s: %s", v.Device, v.Size, v.ValidatedAt.Format("2006-01-02 15:04"), status)}, probeNotes(v.Validation.Probes)...)
	if ct, err := t.Contract(v.Size); err == nil && ct.Hash != v.TaskHash {
		parts = append(parts, "the task changed since: validate it again")
	}
	return strings.Join(parts, "; ")
}

// probeNotes says which probed distributions a task's evaluations add a trial under, and why the
// others are not.
func probeNotes(probes []sdk.ProbedDistribution) []string {
	var kept, refused []string
	for _, p := range probes {
		if p.Kept {
			kept = append(kept, p.Dist)
		} else {
			refused = append(refused, p.Dist+" ("+p.Reason+")")
		}
	}
	var out []string
	if len(kept) > 0 {
		out = append(out, "probe trials under "+strings.Join(kept, ", "))
	}
	if len(refused) > 0 {
		out = append(out, "no probe trial under "+strings.Join(refused, ", "))
	}
	return out
}

func printJSON(w interface{ Write([]byte) (int, error) }, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
