package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/examples/kernels"
	"github.com/kbplatform/kbplatform/internal/contract"
	"github.com/kbplatform/kbplatform/internal/pipeline"
	"github.com/kbplatform/kbplatform/internal/record"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

func (a *app) evalCmd() *cobra.Command {
	var taskID string
	var kernelFiles []string
	var examples, flagged, hostile, asJSON bool
	var backend string
	cmd := &cobra.Command{
		Use:   "eval --task ID --kernel FILE | eval --examples [--flagged] [--hostile]",
		Short: "Evaluate candidate kernels with the contract and store the verdicts",
		Long: `Evaluate one or more ModelNew files against a task, or (--examples) every bundled example
kernel that runs on the device. Each evaluation checks correctness over several seeds and input
distributions in an isolated process, times candidate and PyTorch eager the same way, and stores
the record in the database. --flagged evaluates the kernels written to carry a flag
(examples/kernels/flagged) and checks that each gets exactly the flags it was written for.
--hostile runs the kernels that each try to escape the evaluation (examples/kernels/hostile: write
the harness, read keys, reach the network, trace the reference, ...) and checks that each was
contained; it exits 3 when one was not. Exit status 3 means at least one kernel failed its verdict; 4 means
no kernel failed but some evaluations got no verdict because the task, the platform or the
environment failed (the record says which).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bundled := examples || flagged || hostile
			if bundled == (taskID != "" || len(kernelFiles) > 0) {
				return fmt.Errorf("give either --examples, --flagged and/or --hostile, or --task with one or more --kernel files")
			}
			if !bundled && (taskID == "" || len(kernelFiles) == 0) {
				return fmt.Errorf("--task and --kernel are both required")
			}
			st, reg, err := a.openWithRegistry()
			if err != nil {
				return err
			}
			defer st.Close()
			var hr *hostileRun
			if hostile { // before any plugin starts: they inherit the planted keys
				if hr, err = startHostile(st); err != nil {
					return err
				}
				defer hr.close()
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
			// Every device of a list is of one kind (cpu never joins a list): the first stands for
			// all of them where a kind is needed (sizes, which examples run).
			device := devices[0]
			var jobs []pipeline.Job
			skipped := map[string]int{}               // bundled kernels that cannot run on this device, by backend
			want := map[string][]string{}             // flagged kernels (by hash): the flags each must carry
			hostileWant := map[string]kernels.Entry{} // hostile kernels (by hash)
			if bundled {
				var entries []kernels.Entry
				if examples {
					ex, err := kernels.Load()
					if err != nil {
						return err
					}
					entries = append(entries, ex...)
				}
				if flagged {
					fl, err := kernels.LoadFlagged()
					if err != nil {
						return err
					}
					entries = append(entries, fl...)
				}
				if hostile {
					hs, err := kernels.LoadHostile()
					if err != nil {
						return err
					}
					for _, h := range hs {
						hostileWant[h.Hash] = h
					}
					entries = append(entries, hs...)
				}
				for _, e := range entries {
					if !e.Runs(device) {
						skipped[e.Backend]++
						continue
					}
					t, err := reg.Get(e.Task)
					if err != nil {
						return fmt.Errorf("example %s: %w", e.Name(), err)
					}
					ct, err := t.Contract(t.PickSize(a.cfg.Size, device))
					if err != nil {
						return err
					}
					jobs = append(jobs, pipeline.Job{Task: ct, Kernel: contract.Kernel{Hash: e.Hash, Source: e.Source, Name: e.Name()}, Device: device, Label: e.Backend})
					if e.Want != nil {
						want[e.Hash] = e.Want
					}
				}
				if len(jobs) == 0 {
					return fmt.Errorf("no bundled kernel runs on %s", device)
				}
			} else {
				t, err := reg.Get(taskID)
				if err != nil {
					return err
				}
				ct, err := t.Contract(t.PickSize(a.cfg.Size, device))
				if err != nil {
					return err
				}
				for _, f := range kernelFiles {
					k, err := readKernel(f)
					if err != nil {
						return err
					}
					jobs = append(jobs, pipeline.Job{Task: ct, Kernel: k, Device: device})
				}
			}
			var cts []sdk.Task
			for _, j := range jobs {
				cts = append(cts, j.Task)
			}
			if g := a.guardMemory(device, cts); g != nil {
				for _, j := range jobs {
					rt, _ := reg.Get(j.Task.ID)
					if why := g.refuse(j.Task, rt); why != "" {
						return fmt.Errorf("refused, nothing was run: %s", why)
					}
				}
			}
			var stored []*store.Evaluation
			var failed, noVerdict int
			perDevice := map[string]int{}
			began := time.Now()
			n := 0
			_, interrupted, storeErr := a.runJobs(st, pm, target, hw, jobs, jobRun{
				backend: func(j pipeline.Job) string {
					if backend == "" && bundled {
						return j.Label
					}
					return backend
				},
				devices: devices, models: deviceModels(hw),
				started: func(run int) {
					n = run
					a.progress("evaluating %d kernel(s) on %s; results go to %s", run, strings.Join(devices, ", "), st.Dir())
				},
				stored: func(o *pipeline.Outcome, ev *store.Evaluation) {
					stored = append(stored, ev)
					if o == nil { // rejected by the static checks
						failed++
						return
					}
					perDevice[o.Job.Device]++
					switch ev.Blame {
					case "":
					case record.BlameKernel:
						failed++
					default:
						noVerdict++
					}
					if !asJSON && n > 1 {
						on := ""
						if len(devices) > 1 {
							on = " on " + o.Job.Device
						}
						a.progress("[%d/%d] %s %s%s: %s", o.Index+1, n, o.Job.Task.ID, o.Job.Kernel.Name, on, shortVerdict(ev.Result))
					}
				},
			})
			if len(devices) > 1 && n > 0 {
				// What the lead's scaling check reads: the throughput and how the work was spread.
				var parts []string
				for _, d := range devices {
					parts = append(parts, fmt.Sprintf("%s %d", d, perDevice[d]))
				}
				el := time.Since(began)
				a.progress("%d evaluations in %.0fs on %d devices (%.0f an hour): %s", n, el.Seconds(), len(devices),
					float64(n)/el.Hours(), strings.Join(parts, ", "))
			}
			if storeErr != nil {
				return storeErr
			}
			if interrupted > 0 {
				fmt.Fprintf(a.errOut, "interrupted: %d of %d evaluations did not finish and were not stored\n", interrupted, n)
			}
			switch {
			case len(stored) == 0:
			case asJSON && len(stored) == 1:
				err = printJSON(a.out, stored[0])
			case asJSON:
				err = printJSON(a.out, stored)
			case len(stored) == 1:
				renderVerdict(a.out, stored[0])
			default:
				renderTable(a.out, stored)
			}
			if err != nil {
				return err
			}
			if bundled && !asJSON {
				a.examplesNotes(device, skipped)
			}
			if hr != nil && !asJSON {
				vs := hr.judge(st, stored, hostileWant, a.cfg.CacheDir)
				if renderHostile(a.out, vs, len(hostileWant)) < len(hostileWant) {
					return exitError{code: exitKernelFailed, msg: "a hostile kernel was not contained"}
				}
				if !examples && !flagged {
					return nil // hostile kernels fail by design: containment is the suite's verdict
				}
			}
			if wrong := flagMismatches(stored, want); len(wrong) > 0 {
				for _, w := range wrong {
					fmt.Fprintln(a.errOut, "flags: "+w)
				}
				return exitError{code: exitKernelFailed, msg: fmt.Sprintf("%d flagged kernel(s) did not get the flags they were written for", len(wrong))}
			} else if flagged && !asJSON {
				fmt.Fprintf(a.out, "flags: each of the %d flagged kernel(s) carries exactly the flags it was written for\n", len(want))
			}
			if interrupted > 0 {
				return exitError{code: exitInterrupted, msg: "interrupted"}
			}
			return verdictExit(failed, noVerdict, len(stored), "evaluations")
		},
	}
	cmd.Flags().StringVar(&taskID, "task", "", "task `ID` (kbplatform tasks list shows them) or a task .py file")
	cmd.Flags().StringArrayVar(&kernelFiles, "kernel", nil, "candidate `FILE` defining ModelNew (repeatable)")
	cmd.Flags().BoolVar(&examples, "examples", false, "evaluate the bundled example kernels that run on the device")
	cmd.Flags().BoolVar(&flagged, "flagged", false, "evaluate the kernels written to carry a flag (examples/kernels/flagged) and check their flags")
	cmd.Flags().BoolVar(&hostile, "hostile", false, "evaluate the kernels that try to escape the evaluation (examples/kernels/hostile) and check each was contained")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the stored record(s) as JSON")
	cmd.Flags().StringVar(&backend, "backend", "", "backend whose static checks to run (cpp, cuda, triton, cutlass; default: guessed from each file)")
	addContractFlags(cmd)
	return cmd
}

func readKernel(path string) (contract.Kernel, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return contract.Kernel{}, err
	}
	h := sha256.Sum256(b)
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return contract.Kernel{Hash: hex.EncodeToString(h[:]), Source: string(b), Name: abs}, nil
}

func shortVerdict(r *contract.Result) string {
	switch {
	case r.Verdict == contract.Pass && r.Timing != nil:
		return fmt.Sprintf("PASS %.2fx (%.4f ms vs eager %.4f ms)", r.Timing.Speedup, r.Timing.Candidate.Median, r.Timing.Reference.Median)
	case r.Verdict == contract.Pass:
		return "PASS"
	case r.ErrorClass == sdk.ClassRejected:
		return "FAIL rejected by static checks"
	case r.Verdict == contract.VerdictError:
		return "ERROR " + r.ErrorClass + " (not the kernel's)"
	}
	return "FAIL " + r.ErrorClass
}

func firstLines(s string, n, width int) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if len(out) == n {
			out = append(out, "...")
			break
		}
		if len(l) > width {
			l = l[:width] + "…"
		}
		out = append(out, l)
	}
	return out
}

// flagMismatches lists the flagged kernels whose stored result is not a pass carrying exactly the
// flags they were written for (want, by kernel hash).
func flagMismatches(stored []*store.Evaluation, want map[string][]string) []string {
	var out []string
	for _, ev := range stored {
		w, ok := want[ev.Result.Kernel.Hash]
		if !ok {
			continue
		}
		var got []string
		for _, f := range ev.Result.Flags {
			if !sdk.MeasurementFlag(f.Name) { // a remark on the timing, not on what the kernel was written to do
				got = append(got, f.Name)
			}
		}
		slices.Sort(got)
		w = slices.Sorted(slices.Values(w))
		if ev.Result.Verdict != contract.Pass || !slices.Equal(got, w) {
			out = append(out, fmt.Sprintf("%s on %s: %s with flags [%s], written for a pass with [%s]", ev.Result.Kernel.Name,
				ev.Result.Task.ID, ev.Result.Verdict, strings.Join(got, ", "), strings.Join(w, ", ")))
		}
	}
	return out
}

// profileLine summarizes a profiled forward: its total time and the most expensive kernels, the
// candidate's own marked with *.
func profileLine(p *sdk.Profile) string {
	if p == nil || len(p.Kernels) == 0 {
		return ""
	}
	var parts []string
	for _, k := range p.Kernels[:min(3, len(p.Kernels))] {
		name := trimKernelName(k.Name)
		if k.Custom {
			name += "*"
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%%", name, 100*k.Share))
	}
	return fmt.Sprintf("%.1f us: %s (* the candidate's own)", p.TotalUS, strings.Join(parts, ", "))
}

// trimKernelName cuts a demangled kernel name to its name: no return type, template arguments or
// parameters.
func trimKernelName(n string) string {
	n = strings.TrimPrefix(n, "void ")
	if i := strings.IndexAny(n, "<("); i > 0 {
		n = n[:i]
	}
	if len(n) > 60 {
		n = n[:57] + "..."
	}
	return n
}

// recipeTarget builds each kernel with its backend's recipe (eval mixes backends in one run).
type recipeTarget struct {
	pipeline.Target
	recipes map[string]*sdk.BuildRecipe
}

func (r recipeTarget) with(k sdk.Kernel) pipeline.Target {
	t := r.Target
	t.Recipe = r.recipes[k.Hash]
	return t
}

func (r recipeTarget) Compile(ctx context.Context, task sdk.Task, k sdk.Kernel, device string) *sdk.CompileResult {
	return r.with(k).Compile(ctx, task, k, device)
}

func (r recipeTarget) Evaluate(ctx context.Context, task sdk.Task, k sdk.Kernel, device string, compiled *sdk.CompileResult) *sdk.Result {
	return r.with(k).Evaluate(ctx, task, k, device, compiled)
}

// renderVerdict prints the one-screen summary of an evaluation.
func renderVerdict(w io.Writer, ev *store.Evaluation) {
	r := ev.Result
	fmt.Fprintf(w, "task      %s (size %s)\n", r.Task.ID, r.Task.Size)
	fmt.Fprintf(w, "kernel    %s (%s)\n", r.Kernel.Name, short(r.Kernel.Hash))
	fmt.Fprintf(w, "device    %s — %s\n", r.Device, r.Fingerprint.Summary())
	if sb := r.Sandbox; sb != nil {
		fmt.Fprintf(w, "sandbox   %s\n", sb)
		for _, m := range sb.Missing {
			fmt.Fprintf(w, "          missing: %s\n", m)
		}
	}
	switch r.Verdict {
	case contract.Pass:
		n := len(r.Trials)
		checked := 0
		if r.Timing != nil {
			checked = r.Timing.Checked
		}
		fmt.Fprintf(w, "verdict   PASS — correct on %d/%d trials (%s), %d timed outputs re-checked\n", n, n, trialSummary(r), checked)
	case contract.VerdictError:
		fmt.Fprintf(w, "verdict   ERROR (no verdict: %s) — %s during %s\n", blameText(ev), r.ErrorClass, r.Phase)
	default:
		fmt.Fprintf(w, "verdict   FAIL — %s during %s\n", r.ErrorClass, r.Phase)
	}
	for _, f := range r.Flags {
		fmt.Fprintf(w, "flag      %s — %s\n", f.Name, firstLines(f.Reason, 1, 160)[0])
	}
	if line := profileLine(r.Profile); line != "" {
		fmt.Fprintf(w, "profile   %s\n", line)
	}
	if r.Message != "" {
		for i, l := range firstLines(r.Message, 24, 160) {
			if i == 0 {
				fmt.Fprintf(w, "why       %s\n", l)
			} else {
				fmt.Fprintf(w, "          %s\n", l)
			}
		}
	}
	if m := r.Mismatch; m != nil && r.ErrorClass == contract.ClassMismatch {
		fmt.Fprintf(w, "where     %s, distribution %s, seed %d", m.Phase, m.Dist, m.Seed)
		if m.Phase == "timing" {
			fmt.Fprintf(w, ", timed call %d", m.Call)
		}
		fmt.Fprintln(w)
	}
	if t := r.Timing; t != nil {
		fmt.Fprintf(w, "timing    candidate median %.4f ms  (IQR %.4f, CV %.1f%%, n=%d)\n", t.Candidate.Median, t.Candidate.IQR, 100*t.Candidate.CV, t.Candidate.N)
		fmt.Fprintf(w, "          eager     median %.4f ms  (IQR %.4f, CV %.1f%%, n=%d)\n", t.Reference.Median, t.Reference.IQR, 100*t.Reference.CV, t.Reference.N)
		fmt.Fprintf(w, "speedup   %.3fx vs PyTorch eager", t.Speedup)
		if t.SpeedupLow > 0 {
			fmt.Fprintf(w, " (per-call speedups: median within %.3f-%.3fx at 95%%)", t.SpeedupLow, t.SpeedupHigh)
		}
		fmt.Fprintln(w)
	}
	if ph := r.Phases; ph != nil && ph.Total > 0 {
		var trials float64
		for _, x := range ph.Trials {
			trials += x
		}
		fmt.Fprintf(w, "time      %.1f s (GPU work %.2f s): processes ready %.1f s, load %.1f s, %d trials %.1f s, timing %.1f s (re-checks %.1f s)\n",
			ph.Total, ph.GPUWork, max(ph.CandidateStart, ph.ReferenceReady), ph.Load, len(ph.Trials), trials, ph.Timing, ph.Rechecks)
		if len(ph.ReferenceOps) > 0 {
			fmt.Fprintf(w, "          inside the reference: %s\n", opsLine(ph.ReferenceOps))
		}
		if len(ph.CandidateOps) > 0 {
			fmt.Fprintf(w, "          inside the candidate: %s (its own account)\n", opsLine(ph.CandidateOps))
		}
	}
	if m := r.Memory; m != nil && m.Footprint > 0 {
		gib := func(b int64) float64 { return float64(b) / (1 << 30) }
		fmt.Fprintf(w, "memory    peak %.1f GiB (reference %.1f + candidate %.1f) for a task whose eager forward needs %.1f GiB (%.1fx",
			gib(m.Peak), gib(m.ReferencePeak), gib(m.CandidatePeak), gib(m.Footprint), m.Ratio())
		if m.Harness > 0 {
			fmt.Fprintf(w, "; %.1fx without the harness's %.2f GiB of flush buffers", m.TaskRatio(), gib(m.Harness))
		}
		fmt.Fprintf(w, ")\n")
		if m.ReferenceAllocated > 0 || m.CandidateAllocated > 0 {
			fmt.Fprintf(w, "          in live tensors at most: reference %.1f + candidate %.1f GiB (what the peaks hold beyond that is the allocators' cache)\n",
				gib(m.ReferenceAllocated), gib(m.CandidateAllocated))
		}
		if m.EvidencePeak > 0 {
			fmt.Fprintf(w, "          the reference's float64 precision run (runtime evidence, after timing) held %.1f GiB apart from that\n", gib(m.EvidencePeak))
		}
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "warning   %s\n", warn)
	}
	for _, is := range ev.Issues {
		if is.Severity != sdk.SeverityError { // errors are the message of a rejection already
			fmt.Fprintf(w, "static    %s: %s\n", is.Code, firstLines(is.Message, 1, 160)[0])
		}
	}
	if ev.ID != "" {
		fmt.Fprintf(w, "stored    %s (kbplatform results show %s)\n", ev.ID, ev.ID[:12])
	}
}

// trialSummary counts the trials per distribution, the task's own first; a trial the contract
// added (an output its distributions barely change) is counted apart.
func trialSummary(r *contract.Result) string {
	seen := map[string]int{}
	var order []string
	for _, t := range r.Trials {
		key := t.Dist
		if t.Added != "" {
			key += " added"
		}
		if seen[key] == 0 {
			order = append(order, key)
		}
		seen[key]++
	}
	var parts []string
	for _, k := range order {
		d, added := strings.CutSuffix(k, " added")
		part := fmt.Sprintf("%s×%d", d, seen[k])
		if added {
			part += " added"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// renderTable prints one line per evaluation.
func renderTable(w io.Writer, evs []*store.Evaluation) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tKERNEL\tDEVICE\tVERDICT\tCANDIDATE ms\tEAGER ms\tSPEEDUP\tID")
	for _, ev := range evs {
		r := ev.Result
		cand, eager, speed := "-", "-", "-"
		if r.Timing != nil {
			cand = fmt.Sprintf("%.4f", r.Timing.Candidate.Median)
			eager = fmt.Sprintf("%.4f", r.Timing.Reference.Median)
			speed = fmt.Sprintf("%.2fx", r.Timing.Speedup)
		}
		verdict := strings.ToUpper(r.Verdict)
		if r.ErrorClass != "" {
			verdict += " " + r.ErrorClass
		}
		for _, measurement := range []bool{false, true} { // what the kernel does first, then how well it was timed
			for _, f := range r.Flags {
				if sdk.MeasurementFlag(f.Name) == measurement {
					verdict += " [" + f.Name + "]"
				}
			}
		}
		id := "-"
		if len(ev.ID) >= 12 {
			id = ev.ID[:12]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Task.ID, trimName(r.Kernel.Name), r.Device, verdict, cand, eager, speed, id)
	}
	tw.Flush()
}

func trimName(n string) string {
	if i := strings.Index(n, "examples/kernels/"); i >= 0 {
		return n[i+len("examples/kernels/"):]
	}
	if len(n) > 40 {
		return "…" + n[len(n)-39:]
	}
	return n
}

// opsLine lists a worker's operations, the costliest first: "timed 32x 0.10 s, compare 12x 0.02 s".
func opsLine(ops map[string]sdk.WorkerOp) string {
	names := make([]string, 0, len(ops))
	for k := range ops {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if ops[names[i]].Seconds != ops[names[j]].Seconds {
			return ops[names[i]].Seconds > ops[names[j]].Seconds
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %dx %.2f s", k, ops[k].Calls, ops[k].Seconds)
	}
	return strings.Join(parts, ", ")
}
