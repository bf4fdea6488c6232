package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/internal/gateway"
	"github.com/kbplatform/kbplatform/internal/registry"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/internal/study"
	"github.com/kbplatform/kbplatform/sdk"
)

func (a *app) studyCmd() *cobra.Command {
	cmd := groupCmd("study", "Run studies (tasks × model × backend × strategy × target) through plugins")
	cmd.AddCommand(a.studyRunCmd(), a.studyListCmd(), a.studyShowCmd(), a.studyStatusCmd(), a.studyReportCmd(), a.studyExportCmd())
	return cmd
}

func (a *app) studyRunCmd() *cobra.Command {
	var file, name, backend, strategy, modelCfg, backendCfg, strategyCfg string
	var models []string
	var tasks, excludeFlags []string
	var level, gens, evals, parallel int
	var tokens int64
	var seconds, cost, studySeconds, studyCost float64
	var asJSON, noCache bool
	cmd := &cobra.Command{
		Use:   "run [FILE.yaml] [--tasks ID,...|--level N] [--model M --backend B --strategy S]",
		Short: "Run (or resume) a study: every arm (model × backend × strategy × target × seed) on every task; finished units are skipped",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if file != "" && file != args[0] {
					return fmt.Errorf("two study files: %s and --file %s", args[0], file)
				}
				file = args[0]
			}
			var f studyFile
			if file != "" {
				var err error
				if f, err = readStudyFile(file); err != nil {
					return err
				}
			}
			flag := func(n string) bool { return cmd.Flags().Changed(n) }
			if flag("name") {
				f.Name = name
			}
			if flag("tasks") {
				f.Tasks = taskSelection{IDs: tasks}
			}
			if flag("level") {
				f.Level = level
				if !flag("tasks") {
					f.Tasks = taskSelection{}
				}
			}
			if flag("model") {
				f.Model, f.Models = pluginSetting{Name: models[0]}, nil
				for _, m := range models[1:] {
					if len(f.Models) == 0 {
						f.Models = []pluginSetting{f.Model}
					}
					f.Models = append(f.Models, pluginSetting{Name: m})
				}
			}
			if flag("backend") {
				f.Backend, f.Backends = pluginSetting{Name: backend}, nil
			}
			if flag("strategy") {
				f.Strategy, f.Strategies = pluginSetting{Name: strategy}, nil
			}
			for n, set := range map[string]func(){
				"budget-generations": func() { f.Budget.Generations = gens },
				"budget-evaluations": func() { f.Budget.Evaluations = evals },
				"budget-tokens":      func() { f.Budget.Tokens = tokens },
				"budget-seconds":     func() { f.Budget.Seconds = seconds },
				"budget-cost":        func() { f.Budget.CostUSD = cost },
				"study-budget-seconds": func() {
					f.StudyBudget.Seconds = studySeconds
				},
				"study-budget-cost": func() { f.StudyBudget.CostUSD = studyCost },
				"parallel":          func() { f.Parallel = parallel },
			} {
				if flag(n) {
					set()
				}
			}
			rawOrNil := func(s string) (json.RawMessage, error) {
				if s == "" {
					return nil, nil
				}
				if !json.Valid([]byte(s)) {
					return nil, fmt.Errorf("plugin config %q is not JSON", s)
				}
				return json.RawMessage(s), nil
			}
			mc, err := rawOrNil(modelCfg)
			if err != nil {
				return err
			}
			bc, err := rawOrNil(backendCfg)
			if err != nil {
				return err
			}
			sc, err := rawOrNil(strategyCfg)
			if err != nil {
				return err
			}
			if f.Model.Name == "" && f.Model.Ref == "" && len(f.Models) == 0 {
				return fmt.Errorf("a study needs a model (--model, or model: / models: in the study file)")
			}
			if len(f.Models) > 0 && mc != nil {
				return fmt.Errorf("--model-config applies to one model; give several models their settings in kbplatform.yaml (models:) or the study file")
			}
			if len(f.Strategies) > 0 && sc != nil {
				return fmt.Errorf("--strategy-config applies to one strategy; give each of the study file's strategies its config:")
			}
			if len(f.Backends) > 0 && bc != nil {
				return fmt.Errorf("--backend-config applies to backend:; give each of the study file's backends its config:")
			}
			ms, err := a.loadModelSettings()
			if err != nil {
				return err
			}
			resolve := func(p pluginSetting, cfg json.RawMessage) (study.PluginRef, error) {
				if cfg == nil && p.Config != nil {
					var err error
					if cfg, err = json.Marshal(p.Config); err != nil {
						return study.PluginRef{}, err
					}
				}
				if p.Ref != "" {
					r, err := ms.modelRef(p.Ref, cfg)
					if p.Name != "" {
						r.Name = p.Name
					}
					return r, err
				}
				return ms.modelRef(p.Name, cfg)
			}
			var modelRef study.PluginRef
			var modelRefs []study.PluginRef
			if len(f.Models) > 0 {
				seen := map[string]bool{}
				for _, p := range f.Models {
					r, err := resolve(p, nil)
					if err != nil {
						return err
					}
					if seen[r.Label()] {
						return fmt.Errorf("model %s is named twice", r.Label())
					}
					seen[r.Label()] = true
					modelRefs = append(modelRefs, r)
				}
			} else if modelRef, err = resolve(f.Model, mc); err != nil {
				return err
			}
			st, reg, err := a.openWithRegistry()
			if err != nil {
				return err
			}
			defer st.Close()
			taskIDs, err := f.Tasks.resolve(reg)
			if err != nil {
				return err
			}
			if len(taskIDs) == 0 {
				if f.Level == 0 {
					return fmt.Errorf("a study needs tasks (--tasks or --level, or tasks: in the study file)")
				}
				for _, t := range reg.List(registry.Filter{Level: f.Level, Origin: registry.OriginSuite}) {
					taskIDs = append(taskIDs, t.ID)
				}
			}
			pm := a.pluginManager(ms.keyVariables(append([]study.PluginRef{modelRef}, modelRefs...))...)
			defer pm.Close()
			device := a.cfg.Device
			if f.Device != "" && !cmd.Flags().Changed("device") && os.Getenv("KBP_DEVICE") == "" {
				device = f.Device
			}
			var contractVersion string
			var devices []string
			{
				t, hw, err := a.target(pm)
				if err != nil {
					return err
				}
				contractVersion = study.ContractOf(hw)
				a.cfg.Device = device
				devices, err = a.pickDevices(hw)
				t.Close()
				if err != nil {
					return err
				}
				// The first device stands for all in the spec (they are of one kind), so the study's id
				// and its resumption do not depend on how many GPUs run it.
				device = devices[0]
			}
			size := a.cfg.Size
			if f.Size != "" && !cmd.Flags().Changed("size") {
				size = f.Size
			}
			var cts []sdk.Task
			var rts []*registry.Task
			for _, id := range taskIDs {
				t, err := reg.Get(id)
				if err != nil {
					return err
				}
				ct, err := t.Contract(t.PickSize(size, device))
				if err != nil {
					return err
				}
				cts, rts = append(cts, ct), append(rts, t)
			}
			if g := a.guardMemory(device, cts); g != nil {
				for i, ct := range cts {
					if why := g.refuse(ct, rts[i]); why != "" {
						return fmt.Errorf("refused, nothing was run: %s", why)
					}
				}
			}
			// A target's settings: the local one gets the host's, the cluster one its connection
			// (passed to the plugin outside the spec, so the study's id holds no address or secret).
			targetSettings := func(r study.PluginRef) (study.PluginRef, error) {
				var err error
				r.Config, err = a.targetSettings(r.Ref, r.Config)
				return r, err
			}
			if f.Target.Name == "" && f.Target.Ref == "" {
				f.Target.Name = a.v.GetString("target")
			}
			targetRef, err := f.Target.plainRef("target", "local")
			if err != nil {
				return err
			}
			if targetRef, err = targetSettings(targetRef); err != nil {
				return err
			}
			strategyRef, err := f.Strategy.plainRef("strategy", "oneshot")
			if err != nil {
				return err
			}
			if sc != nil {
				strategyRef.Config = sc
			}
			base := study.Spec{
				Name: f.Name, Tasks: taskIDs, Size: size, Device: device, Seed: f.Seed, Contract: a.cfg.Contract,
				ContractVersion: contractVersion, Model: modelRef, Models: modelRefs, Strategy: strategyRef, Target: targetRef,
				Budget: sdk.Budget{Generations: f.Budget.Generations, Evaluations: f.Budget.Evaluations, Tokens: f.Budget.Tokens,
					Seconds: f.Budget.Seconds, CostUSD: f.Budget.CostUSD},
				Limit: study.StudyBudget{Seconds: f.StudyBudget.Seconds, CostUSD: f.StudyBudget.CostUSD},
			}
			var specs []study.Spec
			if f.arms() {
				// One study of several arms.
				if base.Backends, err = plainRefs("backend", f.Backends); err != nil {
					return err
				}
				if len(base.Backends) == 0 {
					if strings.Contains(f.Backend.Name, ",") {
						return fmt.Errorf("backend: %q: in a study of arms, list several backends under backends:", f.Backend.Name)
					}
					if base.Backend, err = f.Backend.plainRef("backend", "cpp"); err != nil {
						return err
					}
					if bc != nil {
						base.Backend.Config = bc
					}
				}
				if base.Strategies, err = plainRefs("strategy", f.Strategies); err != nil {
					return err
				}
				if base.Targets, err = plainRefs("target", f.Targets); err != nil {
					return err
				}
				for i := range base.Targets {
					if base.Targets[i], err = targetSettings(base.Targets[i]); err != nil {
						return err
					}
				}
				base.Seeds = f.Seeds
				specs = append(specs, base)
			} else {
				// Several backends given as `a,b` compare side by side: one study each, as before arms.
				backends, err := backendRefs(f.Backend, bc)
				if err != nil {
					return err
				}
				for _, b := range backends {
					s := base
					s.Backend = b
					specs = append(specs, s)
				}
			}
			units := f.Parallel
			if units == 0 {
				// On a CPU target the model and strategy plugins of a second unit would share the
				// processor a timing runs on; on a GPU only the device must be kept to one timing.
				units = 1
				if device != "cpu" {
					// Two units per GPU: one evaluates while the other waits for its model.
					units = max(4, 2*len(devices))
				}
			}
			var reports []*study.Report
			var runErr error
			for _, spec := range specs {
				arms := spec.Arms()
				a.progress("study %s: %d tasks × %d arms, %s + %s + %s on %s (%s)", spec.ID(), len(spec.Tasks), len(arms), modelLabels(spec),
					partLabels(spec, 1), partLabels(spec, 2), partLabels(spec, 3), strings.Join(devices, ", "))
				start := time.Now()
				bar := newStudyBar(a.errOut, a.cfg.Quiet, spec.ID())
				rep, err := study.Run(a.ctx, spec, study.Deps{Store: st, Registry: reg, Plugins: pm,
					Progress: func(m string) { bar.line(fmt.Sprintf("· %5.1fs %s", time.Since(start).Seconds(), m)) },
					Status:   bar.status, Gateway: ms.gatewayOptions(noCache), Limiters: gateway.NewLimiters(),
					Parallel: units, CompileWorkers: a.cfg.CompileWorkers, Devices: devices})
				bar.finish()
				if rep != nil && len(excludeFlags) > 0 {
					rep.ExcludeFlags = excludeFlags
					if serr := study.Summarize(st, rep); serr != nil && err == nil {
						err = serr
					}
				}
				if rep != nil {
					reports = append(reports, rep)
				}
				if errors.Is(err, sdk.ErrInvalidConfig) {
					err = fmt.Errorf("%s: %w", configSource(err, file, map[string]bool{"model": mc != nil, "backend": bc != nil, "strategy": sc != nil}), err)
				}
				if err != nil {
					runErr = fmt.Errorf("%s: %w", spec.Backend.Ref, err)
					if len(specs) == 1 {
						runErr = err
					}
					break
				}
			}
			switch {
			case len(reports) == 0:
			case asJSON && len(specs) == 1:
				_ = printJSON(a.out, reports[0])
			case asJSON:
				_ = printJSON(a.out, reports)
			case len(reports) == 1:
				renderStudy(a.out, reports[0])
			default:
				renderComparison(a.out, reports)
			}
			if !asJSON {
				for _, rep := range reports {
					if calls, cerr := st.Calls(rep.Study); cerr == nil && len(calls) > 0 {
						renderCosts(a.out, gateway.Costs(calls))
					}
				}
			}
			if runErr != nil {
				return runErr
			}
			for _, rep := range reports {
				if rep.Stopped != "" {
					return exitError{code: 3, msg: rep.Stopped}
				}
				for _, o := range rep.Outcomes {
					if o.Error != "" {
						return exitError{code: 3, msg: "some tasks did not finish; run the same study again to retry them"}
					}
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "file", "", "study file (the same as the FILE.yaml argument; see docs/strategies.md)")
	f.StringVar(&name, "name", "", "a name for the study")
	f.StringSliceVar(&tasks, "tasks", nil, "task ids")
	f.IntVar(&level, "level", 0, "all suite tasks of a level")
	f.StringArrayVar(&models, "model", nil, "model: a plugin (replay, openai), plugin:model (openai:gpt-5) or a named configuration of kbplatform.yaml; repeat to compare several")
	f.StringVar(&backend, "backend", "", "backend plugin, or several separated by commas for a side-by-side comparison (default cpp)")
	f.StringVar(&strategy, "strategy", "", "strategy plugin (default oneshot)")
	f.StringVar(&modelCfg, "model-config", "", "model settings as JSON")
	f.StringVar(&backendCfg, "backend-config", "", `backend settings as JSON; with several backends, an object by backend name ({"cutlass": {...}})`)
	f.StringSliceVar(&excludeFlags, "exclude-flag", nil, "leave results with this flag out of correctness and fast_p too (repeatable: timing_unresolved, gpu_shared, cpu_shared; a kernel flag such as no_custom_kernel is never a solution)")
	f.StringVar(&strategyCfg, "strategy-config", "", "strategy settings as JSON")
	f.IntVar(&gens, "budget-generations", 0, "model completions per unit (0: unlimited)")
	f.IntVar(&evals, "budget-evaluations", 0, "evaluations per unit (0: unlimited)")
	f.Int64Var(&tokens, "budget-tokens", 0, "prompt and completion tokens per unit (0: unlimited)")
	f.Float64Var(&seconds, "budget-seconds", 0, "wall time per unit in seconds (0: unlimited)")
	f.Float64Var(&cost, "budget-cost", 0, "model spend per unit in dollars (0: unlimited)")
	f.Float64Var(&studySeconds, "study-budget-seconds", 0, "wall time of the whole study over all its runs; no unit starts after it (0: unlimited)")
	f.Float64Var(&studyCost, "study-budget-cost", 0, "model spend of the whole study in dollars; no unit starts after it (0: unlimited)")
	f.IntVar(&parallel, "parallel", 0, "units run at once (default 1 on a CPU, 4 on a GPU, 2 per GPU on more than two); evaluations still take each device one at a time")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&noCache, "no-cache", false, "send every model request even when the response cache holds its reply")
	addContractFlags(cmd)
	return cmd
}

func modelLabels(spec study.Spec) string { return partLabels(spec, 0) }

// partLabels lists the distinct labels of one part of the study's arms: 0 models, 1 backends,
// 2 strategies, 3 targets (plugin refs, or the names given to configurations).
func partLabels(spec study.Spec, part int) string {
	var out []string
	for _, a := range spec.Arms() {
		r := []study.PluginRef{a.Model, a.Backend, a.Strategy, a.Target}[part]
		l := r.Label()
		if part > 0 && r.Name == "" {
			l = r.Ref
		}
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return strings.Join(out, ", ")
}

// configSource names where the settings a plugin refused came from: its --KIND-config flag or
// the study file.
func configSource(err error, file string, fromFlag map[string]bool) string {
	kind, _, _ := strings.Cut(err.Error(), ":")
	kind, _, _ = strings.Cut(kind, " ") // "model replay: ..." names the kind first
	switch {
	case fromFlag[kind]:
		return "--" + kind + "-config"
	case file != "":
		return file + " (" + kind + ".config)"
	}
	return kind + " settings"
}

func renderStudy(w interface{ Write([]byte) (int, error) }, rep *study.Report) {
	multi := len(rep.Spec.Arms()) > 1
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if multi {
		// A study that compares models only names its arms by model, as before arms.
		col := "ARM"
		if armsAreModels(rep.Spec) {
			col = "MODEL"
		}
		fmt.Fprint(tw, col+"\t")
	}
	fmt.Fprintln(tw, "TASK\tSTATUS\tATTEMPTS\tCORRECT\tBEST SPEEDUP\tBEST EVALUATION\tREASON")
	for _, o := range rep.Outcomes {
		status := "done"
		reason := o.Reason
		switch {
		case o.Blame != "":
			status = "no verdict (" + o.Blame + ")"
		case o.Error != "":
			status = "error"
			reason = o.Error
		case o.Skipped:
			status = "done (earlier run)"
		case !o.HasRun():
			status = "not run"
		case !o.Done:
			status = "not finished"
		}
		speed, best, correct := "-", "-", "no"
		switch {
		case o.Correct:
			correct = "yes"
			speed = fmt.Sprintf("%.2fx", o.BestSpeedup)
			if len(o.BestEval) >= 12 {
				best = o.BestEval[:12]
			}
		case o.Flagged:
			correct = "flagged"
			speed = fmt.Sprintf("(%.2fx)", o.FlaggedSpeedup)
		}
		if o.Blame != "" {
			correct = "-"
		}
		if reason == "" {
			reason = "-"
		}
		if multi {
			fmt.Fprintf(tw, "%s\t", o.Arm)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", o.Task, status, o.Attempts, correct, speed, best, firstLines(reason, 1, 100)[0])
	}
	tw.Flush()
	if multi {
		arms, by := study.ByArm(rep.Outcomes)
		for _, m := range arms {
			o := by[m]
			if study.NotRun(o) == len(o) {
				fmt.Fprintf(w, "%s: no unit ran\n", m)
				continue
			}
			fmt.Fprintf(w, "%s: %s  (%d tasks)\n", m, fastPLine(o), study.Judged(o))
		}
	}
	judged, notRun := study.Judged(rep.Outcomes), study.NotRun(rep.Outcomes)
	fmt.Fprintf(w, "study %s: %s  (%d tasks", rep.Study, fastPLine(rep.Outcomes), judged)
	if n := len(rep.Outcomes) - judged - notRun; n > 0 {
		fmt.Fprintf(w, "; %d without a verdict about any kernel, left out", n)
	}
	if notRun > 0 {
		fmt.Fprintf(w, "; %d of %d units did not run, left out: run the study again to resume", notRun, len(rep.Outcomes))
	}
	fmt.Fprintln(w, ")")
	if study.AnyFlagged(rep.Outcomes) {
		fmt.Fprintf(w, "a pass carrying a kernel flag (%s) is no solution; \"counting flagged\" counts it\n", strings.Join(sdk.KernelFlags(), ", "))
	}
	if len(rep.ExcludeFlags) > 0 {
		fmt.Fprintf(w, "results flagged %s are left out\n", strings.Join(rep.ExcludeFlags, ", "))
	}
	if rep.Stopped != "" {
		fmt.Fprintln(w, rep.Stopped)
	}
}

// fastPLine is fast_0, fast_1, fast_1.5 and fast_2 over the outcomes, each with the figure
// counting passes that carry a kernel flag beside it when some do ("fast_1 0.40, 0.55 counting
// flagged").
func fastPLine(outcomes []study.TaskOutcome) string {
	flagged := study.AnyFlagged(outcomes)
	var parts []string
	for _, p := range []float64{0, 1, 1.5, 2} {
		part := fmt.Sprintf("fast_%g %.2f", p, study.FastP(outcomes, p, false))
		if flagged {
			part += fmt.Sprintf(", %.2f counting flagged", study.FastP(outcomes, p, true))
		}
		parts = append(parts, part)
	}
	if flagged {
		return strings.Join(parts, "; ")
	}
	return strings.Join(parts, "  ")
}

// armsAreModels reports whether the study's arms differ in their model only.
func armsAreModels(spec study.Spec) bool {
	arms := spec.Arms()
	for _, a := range arms[1:] {
		if a.Backend.Ref != arms[0].Backend.Ref || a.Strategy.Label() != arms[0].Strategy.Label() || a.Target.Ref != arms[0].Target.Ref ||
			a.Seed != arms[0].Seed || a.Key() == arms[0].Key() {
			return false
		}
	}
	return true
}

// studyListing is one study of `study list --json`.
type studyListing struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Tasks     int       `json:"tasks"`
	Arms      int       `json:"arms"`
	Units     int       `json:"units"`
	Done      int       `json:"done"`
	// State is the latest run's (running, finished, stopped, budget), when one was recorded.
	State string `json:"state,omitempty"`
}

func (a *app) studyListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List stored studies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.readStore()
			if err != nil {
				return err
			}
			defer st.Close()
			studies, err := st.Studies()
			if err != nil {
				return err
			}
			list := []studyListing{}
			for _, s := range studies {
				var spec study.Spec
				if err := json.Unmarshal(s.Spec, &spec); err != nil {
					return fmt.Errorf("study %s: stored spec: %w", s.ID, err)
				}
				units, err := st.Units(s.ID)
				if err != nil {
					return err
				}
				l := studyListing{ID: s.ID, Name: s.Name, CreatedAt: s.CreatedAt, Tasks: len(spec.Tasks), Arms: len(spec.Arms()),
					Units: len(spec.Tasks) * len(spec.Arms()), Done: len(units)}
				if r, err := st.LastStudyRun(s.ID); err == nil {
					l.State = runState(r)
				}
				list = append(list, l)
			}
			if asJSON {
				return printJSON(a.out, list)
			}
			tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tCREATED (UTC)\tUNITS DONE\tARMS\tSTATE")
			for _, l := range list {
				state := l.State
				if state == "" {
					state = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%s\n", l.ID, l.Name, l.CreatedAt.Format("2006-01-02 15:04"), l.Done, l.Units, l.Arms, state)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) studyShowCmd() *cobra.Command {
	var asJSON bool
	var excludeFlags []string
	var task string
	cmd := &cobra.Command{
		Use:   "show ID [ID...] [--task T]",
		Short: "Show a study's outcome per task and its fast_p; several studies side by side; one task's trajectory with --task",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.readStore()
			if err != nil {
				return err
			}
			defer st.Close()
			if task != "" {
				if len(args) > 1 {
					return fmt.Errorf("--task shows one study's trajectory; give one study id")
				}
				return a.showTrajectory(st, args[0], task, asJSON)
			}
			var reps []*study.Report
			var studies []*store.Study
			for _, id := range args {
				s, err := st.Study(id)
				if err != nil {
					return err
				}
				var spec study.Spec
				if err := json.Unmarshal(s.Spec, &spec); err != nil {
					return err
				}
				rep := study.EmptyReport(s.ID, spec)
				rep.ExcludeFlags = excludeFlags
				if err := study.Summarize(st, rep); err != nil {
					return err
				}
				reps = append(reps, rep)
				studies = append(studies, s)
			}
			if asJSON && len(reps) == 1 {
				atts, _ := st.Attempts(reps[0].Study, "")
				calls, _ := st.Calls(reps[0].Study)
				return printJSON(a.out, map[string]any{"report": reps[0], "attempts": atts, "calls": calls})
			}
			if asJSON {
				return printJSON(a.out, reps)
			}
			if len(reps) > 1 {
				renderComparison(a.out, reps)
				return nil
			}
			s, spec := studies[0], reps[0].Spec
			fmt.Fprintf(a.out, "study %s %s: %s + %s + %s on %s (%s), budget %s per unit\n", s.ID, s.Name,
				modelLabels(spec), partLabels(spec, 1), partLabels(spec, 2), partLabels(spec, 3), spec.Device, budgetText(spec.Budget))
			renderStudy(a.out, reps[0])
			if calls, err := st.Calls(s.ID); err == nil && len(calls) > 0 {
				renderCosts(a.out, gateway.Costs(calls))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (with every attempt and model call, for one study)")
	cmd.Flags().StringSliceVar(&excludeFlags, "exclude-flag", nil, "leave results with this flag out of correctness and fast_p too (repeatable; a kernel flag is never a solution)")
	cmd.Flags().StringVar(&task, "task", "", "print this task's trajectory: every attempt of every arm, its feedback, reply and verdict")
	return cmd
}

// budgetText is a unit budget in words.
func budgetText(b sdk.Budget) string {
	var parts []string
	if b.Generations > 0 {
		parts = append(parts, fmt.Sprintf("%d generations", b.Generations))
	}
	if b.Evaluations > 0 {
		parts = append(parts, fmt.Sprintf("%d evaluations", b.Evaluations))
	}
	if b.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", b.Tokens))
	}
	if b.Seconds > 0 {
		parts = append(parts, fmt.Sprintf("%gs", b.Seconds))
	}
	if b.CostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%g", b.CostUSD))
	}
	if len(parts) == 0 {
		return "unlimited"
	}
	return strings.Join(parts, " / ")
}
