package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/examples/kernels"
	"github.com/kbplatform/kbplatform/internal/contract"
	"github.com/kbplatform/kbplatform/internal/faults"
	"github.com/kbplatform/kbplatform/internal/pipeline"
	"github.com/kbplatform/kbplatform/internal/registry"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

// catchTarget is the share of judged mutants the contract must catch in every language.
const catchTarget = 0.98

func (a *app) campaignCmd() *cobra.Command {
	cmd := groupCmd("campaign", "Measure the contract itself: run suites of kernels built to be wrong")
	cmd.AddCommand(a.campaignFaultsCmd())
	return cmd
}

func (a *app) campaignFaultsCmd() *cobra.Command {
	var languages, classes []string
	var list bool
	cmd := &cobra.Command{
		Use:   "faults [--language cpp] [--device cpu]",
		Short: "Inject faults into the bundled kernels and count how many the contract catches",
		Long: `Derive faulty variants (mutants) of the bundled example kernels by rewriting their source, one
per fault class and file (ReLU's max dropped, a loop bound one short, the remainder after the last
block not computed, the wrong axis, a wrong epsilon, fp16/bf16 accumulation, part of the output
unwritten, __syncthreads() dropped, a result cached by input pointer or computed once), evaluate
each honest file and every mutant with the contract, and print per language and class how many
mutants were caught: a fail of any class, or a pass carrying a flag that makes it no solution.
Tasks run at the campaign's small sizes (extents that are no multiple of a block) unless --size
names another. --list prints the mutants and the classes that do not apply, without running.
Exit status 3 means a language's catch rate is below 98%, or a mutant did not build (a bug of the
patterns); 4 that an honest file did not pass or an evaluation got no verdict.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			origins, err := kernels.Load()
			if err != nil {
				return err
			}
			origins = slices.DeleteFunc(origins, func(e kernels.Entry) bool {
				return len(languages) > 0 && !slices.Contains(languages, e.Backend)
			})
			if len(origins) == 0 {
				return fmt.Errorf("no bundled kernel is written in %s", strings.Join(languages, ", "))
			}
			for _, c := range classes {
				if !slices.Contains(faults.Classes(), faults.Class(c)) {
					return fmt.Errorf("no fault class %q (classes: %s)", c, joinClasses(faults.Classes()))
				}
			}
			keep := func(c faults.Class) bool { return len(classes) == 0 || slices.Contains(classes, string(c)) }
			if list {
				mutants, na := faults.Generate(origins)
				renderMutantList(a.out, mutants, na, keep)
				return nil
			}
			return a.runFaultCampaign(origins, keep)
		},
	}
	cmd.Flags().StringSliceVar(&languages, "language", nil, "kernel languages to mutate: cpp, cuda, triton, cutlass (default: those that run on the device)")
	cmd.Flags().StringSliceVar(&classes, "class", nil, "fault classes to inject (default: all)")
	cmd.Flags().BoolVar(&list, "list", false, "print the mutants and the classes not applicable to each file, and run nothing")
	addContractFlags(cmd)
	return cmd
}

// runFaultCampaign evaluates the honest origins that run on the device and their mutants, and
// prints the tally.
func (a *app) runFaultCampaign(all []kernels.Entry, keep func(faults.Class) bool) error {
	st, reg, err := a.openWithRegistry()
	if err != nil {
		return err
	}
	defer st.Close()
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
	skipped := map[string]int{}
	var origins []kernels.Entry
	for _, e := range all {
		if e.Runs(device) {
			origins = append(origins, e)
		} else {
			skipped[e.Backend]++
		}
	}
	if len(origins) == 0 {
		return fmt.Errorf("none of these kernels runs on %s", device)
	}
	mutants, na := faults.Generate(origins)
	mutants = slices.DeleteFunc(mutants, func(m faults.Mutant) bool { return !keep(m.Class) })
	na = slices.DeleteFunc(na, func(n faults.NotApplicable) bool { return !keep(n.Class) })

	// One job per honest file (the control) and one per mutant, each at the campaign's size.
	tasks := map[string]sdk.Task{}
	var jobs []pipeline.Job
	add := func(e kernels.Entry, k contract.Kernel) error {
		ct, ok := tasks[e.Task]
		if !ok {
			t, err := reg.Get(e.Task)
			if err != nil {
				return fmt.Errorf("%s: %w", e.Name(), err)
			}
			if ct, err = campaignTask(t, a.cfg.Size, device); err != nil {
				return err
			}
			tasks[e.Task] = ct
		}
		jobs = append(jobs, pipeline.Job{Task: ct, Kernel: k, Device: device, Label: e.Backend})
		return nil
	}
	for _, e := range origins {
		if err := add(e, contract.Kernel{Hash: e.Hash, Source: e.Source, Name: e.Name()}); err != nil {
			return err
		}
	}
	for _, m := range mutants {
		if err := add(m.Origin, contract.Kernel{Hash: m.Hash, Source: m.Source, Name: m.Name()}); err != nil {
			return err
		}
	}
	results := map[string]*sdk.Result{} // by kernel hash
	controlCount, n := len(origins), 0
	_, interrupted, err := a.runJobs(st, pm, target, hw, jobs, jobRun{
		backend: func(j pipeline.Job) string { return j.Label },
		started: func(run int) {
			n = run
			a.progress("fault campaign: %d honest kernel(s) and %d mutant(s) on %s; results go to %s", controlCount, len(jobs)-controlCount, jobs[0].Device, st.Dir())
		},
		stored: func(o *pipeline.Outcome, ev *store.Evaluation) {
			results[ev.Result.Kernel.Hash] = ev.Result
			if o != nil {
				a.progress("[%d/%d] %s: %s", o.Index+1, n, o.Job.Kernel.Name, shortVerdict(ev.Result))
			}
		},
	})
	if err != nil {
		return err
	}
	// A mutant is judged only against an origin that passed cleanly at this size.
	controls := map[string]string{} // origin hash -> why it does not count, "" when it passed
	for _, e := range origins {
		r := results[e.Hash]
		if !r.Solution() {
			controls[e.Hash] = faults.Got(r)
		} else {
			controls[e.Hash] = ""
		}
	}
	var findings []faults.Finding
	for _, m := range mutants {
		r, ok := results[m.Hash]
		if !ok {
			continue // interrupted before it ran
		}
		f := faults.Finding{Mutant: m, Outcome: faults.Judge(r), Got: faults.Got(r)}
		if controls[m.Origin.Hash] != "" {
			f.Outcome = faults.Unjudged
		}
		findings = append(findings, f)
	}
	rows := faults.Tally(findings, na)
	renderCampaign(a.out, rows, findings, origins, controls)
	if len(skipped) > 0 {
		a.examplesNotes(device, skipped)
	}
	if interrupted > 0 {
		return exitError{code: exitInterrupted, msg: fmt.Sprintf("interrupted: %d evaluation(s) did not finish", interrupted)}
	}
	var low, broken, noVerdict []string
	for _, r := range rows {
		if r.Class != "" {
			continue
		}
		if rate, ok := r.Rate(); ok && rate < catchTarget {
			low = append(low, fmt.Sprintf("%s %.1f%%", r.Language, 100*rate))
		}
		if r.Invalid > 0 {
			broken = append(broken, fmt.Sprintf("%s %d", r.Language, r.Invalid))
		}
		if r.NoVerdict+r.Unjudged > 0 {
			noVerdict = append(noVerdict, fmt.Sprintf("%s %d", r.Language, r.NoVerdict+r.Unjudged))
		}
	}
	switch {
	case len(low) > 0:
		return exitError{code: exitKernelFailed, msg: fmt.Sprintf("catch rate below %.0f%%: %s", 100*catchTarget, strings.Join(low, ", "))}
	case len(broken) > 0:
		return exitError{code: exitKernelFailed, msg: "mutants that did not build or import (a bug of the patterns, not of the contract): " + strings.Join(broken, ", ")}
	case len(noVerdict) > 0:
		return exitError{code: exitNoVerdict, msg: "mutants not judged (no verdict, or their honest file did not pass): " + strings.Join(noVerdict, ", ")}
	}
	return nil
}

// campaignTask is the task at the campaign's size, or at the size asked for.
func campaignTask(t *registry.Task, size, device string) (sdk.Task, error) {
	if size == "" || size == "auto" || size == faults.SizeName {
		vals, ok := faults.Sizes()[t.ID]
		if !ok {
			return sdk.Task{}, fmt.Errorf("the fault campaign has no size for task %s", t.ID)
		}
		c := *t
		c.Meta.Sizes = maps.Clone(t.Meta.Sizes)
		if c.Meta.Sizes == nil {
			c.Meta.Sizes = map[string]map[string]any{}
		}
		c.Meta.Sizes[faults.SizeName] = vals
		return c.Contract(faults.SizeName)
	}
	return t.Contract(t.PickSize(size, device))
}

// renderCampaign prints the table per language and class, then every mutant that was not
// caught, then each language's closing line.
func renderCampaign(w io.Writer, rows []faults.Row, findings []faults.Finding, origins []kernels.Entry, controls map[string]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "LANGUAGE\tCLASS\tMUTANTS\tCAUGHT\tMISSED\tOTHER\tN/A\tCAUGHT %\t")
	for _, r := range rows {
		class := string(r.Class)
		if r.Class == "" {
			class = "all"
		}
		rate := "-"
		if x, ok := r.Rate(); ok {
			rate = fmt.Sprintf("%.1f", 100*x)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.Language, class, r.Mutants, r.Caught, r.Missed, r.Invalid+r.NoVerdict+r.Unjudged, r.NotApp, rate)
	}
	tw.Flush()
	for _, e := range origins {
		if why := controls[e.Hash]; why != "" {
			fmt.Fprintf(w, "honest kernel %s did not pass cleanly (%s): its mutants are not judged\n", e.Name(), why)
		}
	}
	for _, o := range []faults.Outcome{faults.Missed, faults.Invalid, faults.NoVerdict} {
		for _, f := range findings {
			if f.Outcome == o {
				fmt.Fprintf(w, "%-10s %-8s %-16s %s: %s\n", o, f.Mutant.Language(), f.Mutant.Class, f.Mutant.Name(), f.Got)
			}
		}
	}
	for _, r := range rows {
		if r.Class == "" {
			fmt.Fprintf(w, "faults %s; target %.0f%%\n", r.Summary(), 100*catchTarget)
		}
	}
}

// renderMutantList prints what a campaign would run.
func renderMutantList(w io.Writer, mutants []faults.Mutant, na []faults.NotApplicable, keep func(faults.Class) bool) {
	n := 0
	for _, m := range mutants {
		if keep(m.Class) {
			fmt.Fprintf(w, "%-8s %-16s %s (%d site(s))\n", m.Language(), m.Class, m.Name(), m.Sites)
			n++
		}
	}
	skip := 0
	for _, x := range na {
		if keep(x.Class) {
			fmt.Fprintf(w, "%-8s %-16s %s: not applicable (no pattern of the class matches)\n", x.Origin.Backend, x.Class, x.Origin.Name())
			skip++
		}
	}
	fmt.Fprintf(w, "%d mutants; %d class-file pairs not applicable\n", n, skip)
}

func joinClasses(cs []faults.Class) string {
	var s []string
	for _, c := range cs {
		s = append(s, string(c))
	}
	return strings.Join(s, ", ")
}
