package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/kbplatform/kbplatform/internal/gateway"
	"github.com/kbplatform/kbplatform/internal/registry"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/internal/study"
	"github.com/kbplatform/kbplatform/sdk"
)

func (a *app) studyCmd() *cobra.Command {
	cmd := groupCmd("study", "Run studies (tasks × model × backend × strategy × target) through plugins")
	cmd.AddCommand(a.studyRunCmd(), a.studyListCmd(), a.studyShowCmd())
	return cmd
}

// studyFile is the YAML form of a study (`study run --file`); flags override it.
type studyFile struct {
	Name     string          `yaml:"name"`
	Tasks    []string        `yaml:"tasks"`
	Level    int             `yaml:"level"`
	Size     string          `yaml:"size"`
	Device   string          `yaml:"device"`
	Model    pluginSetting   `yaml:"model"`
	Models   []pluginSetting `yaml:"models"` // several models, each on every task
	Backend  pluginSetting   `yaml:"backend"`
	Strategy pluginSetting   `yaml:"strategy"`
	Target   pluginSetting   `yaml:"target"`
	Budget   sdk.Budget      `yaml:"budget"`
	Seed     int64           `yaml:"seed"`
}

type pluginSetting struct {
	Name   string         `yaml:"name"`
	Config map[string]any `yaml:"config"`
}

func (p pluginSetting) ref(kind, def string, cfg json.RawMessage) study.PluginRef {
	name := p.Name
	if name == "" {
		name = def
	}
	if !strings.Contains(name, "/") {
		name = kind + "/" + name
	}
	if cfg == nil && p.Config != nil {
		cfg, _ = json.Marshal(p.Config)
	}
	return study.PluginRef{Ref: name, Config: cfg}
}

func (a *app) studyRunCmd() *cobra.Command {
	var file, name, backend, strategy, modelCfg, backendCfg, strategyCfg string
	var models []string
	var tasks, excludeFlags []string
	var level, gens, evals int
	var asJSON, noCache bool
	cmd := &cobra.Command{
		Use:   "run [--file study.yaml] [--tasks ID,...|--level N] --model M --backend B --strategy S",
		Short: "Run (or resume) a study; finished tasks of the same study are skipped",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var f studyFile
			if file != "" {
				b, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				dec := yaml.NewDecoder(strings.NewReader(string(b)))
				dec.KnownFields(true)
				if err := dec.Decode(&f); err != nil {
					return studyFileError(file, err)
				}
			}
			flag := func(n string) bool { return cmd.Flags().Changed(n) }
			if flag("name") {
				f.Name = name
			}
			if flag("tasks") {
				f.Tasks = tasks
			}
			if flag("level") {
				f.Level = level
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
				f.Backend.Name = backend
			}
			if flag("strategy") {
				f.Strategy.Name = strategy
			}
			if flag("budget-generations") {
				f.Budget.Generations = gens
			}
			if flag("budget-evaluations") {
				f.Budget.Evaluations = evals
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
			if f.Model.Name == "" && len(f.Models) == 0 {
				return fmt.Errorf("a study needs a model (--model, or model: in --file)")
			}
			if len(f.Models) > 0 && mc != nil {
				return fmt.Errorf("--model-config applies to one model; give several models their settings in kbplatform.yaml (models:)")
			}
			ms, err := a.loadModelSettings()
			if err != nil {
				return err
			}
			resolve := func(p pluginSetting, cfg json.RawMessage) (study.PluginRef, error) {
				if p.Name == "" {
					return study.PluginRef{}, fmt.Errorf("a model needs a name")
				}
				if cfg == nil && p.Config != nil {
					var err error
					if cfg, err = json.Marshal(p.Config); err != nil {
						return study.PluginRef{}, err
					}
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
			if len(f.Tasks) == 0 {
				if f.Level == 0 {
					return fmt.Errorf("a study needs tasks (--tasks or --level)")
				}
				for _, t := range reg.List(registry.Filter{Level: f.Level, Origin: registry.OriginSuite}) {
					f.Tasks = append(f.Tasks, t.ID)
				}
			}
			pm := a.pluginManager(ms.keyVariables(append([]study.PluginRef{modelRef}, modelRefs...))...)
			defer pm.Close()
			device := a.cfg.Device
			if f.Device != "" && !cmd.Flags().Changed("device") && os.Getenv("KBP_DEVICE") == "" {
				device = f.Device
			}
			var contractVersion string
			{
				t, hw, err := a.target(pm)
				if err != nil {
					return err
				}
				contractVersion = study.ContractOf(hw)
				a.cfg.Device = device
				device, err = a.pickDevice(hw)
				t.Close()
				if err != nil {
					return err
				}
			}
			size := a.cfg.Size
			if f.Size != "" && !cmd.Flags().Changed("size") {
				size = f.Size
			}
			var cts []sdk.Task
			var rts []*registry.Task
			for _, id := range f.Tasks {
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
			targetRef := f.Target.ref("target", a.v.GetString("target"), nil)
			if targetRef.Config, err = a.targetSettings(targetRef.Ref, targetRef.Config); err != nil {
				return err
			}
			backends, err := backendRefs(f.Backend, bc)
			if err != nil {
				return err
			}
			var reports []*study.Report
			var runErr error
			for _, backendRef := range backends {
				spec := study.Spec{
					Name: f.Name, Tasks: f.Tasks, Size: size, Device: device, Budget: f.Budget, Seed: f.Seed, Contract: a.cfg.Contract,
					ContractVersion: contractVersion,
					Model:           modelRef,
					Models:          modelRefs,
					Backend:         backendRef,
					Strategy:        f.Strategy.ref("strategy", "oneshot", sc),
					Target:          targetRef,
				}
				a.progress("study %s: %d tasks, %s + %s + %s on %s (%s)", spec.ID(), len(spec.Tasks), modelLabels(spec), spec.Backend.Ref, spec.Strategy.Ref, spec.Target.Ref, device)
				start := time.Now()
				rep, err := study.Run(a.ctx, spec, study.Deps{Store: st, Registry: reg, Plugins: pm, Progress: func(m string) {
					a.progress("%5.1fs %s", time.Since(start).Seconds(), m)
				}, Gateway: ms.gatewayOptions(noCache), Limiters: gateway.NewLimiters()})
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
					runErr = fmt.Errorf("%s: %w", backendRef.Ref, err)
					break
				}
			}
			switch {
			case len(reports) == 0:
			case asJSON && len(backends) == 1:
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
	f.StringVar(&file, "file", "", "study file (YAML: name, tasks, level, size, device, model/backend/strategy/target {name, config}, budget, seed)")
	f.StringVar(&name, "name", "", "a name for the study")
	f.StringSliceVar(&tasks, "tasks", nil, "task ids")
	f.IntVar(&level, "level", 0, "all suite tasks of a level")
	f.StringArrayVar(&models, "model", nil, "model: a plugin (replay, openai), plugin:model (openai:gpt-5) or a named configuration of kbplatform.yaml; repeat to compare several")
	f.StringVar(&backend, "backend", "", "backend plugin, or several separated by commas for a side-by-side comparison (default cpp)")
	f.StringVar(&strategy, "strategy", "", "strategy plugin (default oneshot)")
	f.StringVar(&modelCfg, "model-config", "", "model settings as JSON")
	f.StringVar(&backendCfg, "backend-config", "", `backend settings as JSON; with several backends, an object by backend name ({"cutlass": {...}})`)
	f.StringSliceVar(&excludeFlags, "exclude-flag", nil, "leave results with this flag out of correctness and fast_p (repeatable: torch_delegation, no_custom_kernel, ...)")
	f.StringVar(&strategyCfg, "strategy-config", "", "strategy settings as JSON")
	f.IntVar(&gens, "budget-generations", 0, "model completions per task (0: unlimited)")
	f.IntVar(&evals, "budget-evaluations", 0, "evaluations per task (0: unlimited)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&noCache, "no-cache", false, "send every model request even when the response cache holds its reply")
	addContractFlags(cmd)
	return cmd
}

func modelLabels(spec study.Spec) string {
	var out []string
	for _, r := range spec.ModelRefs() {
		out = append(out, r.Label())
	}
	return strings.Join(out, ", ")
}

// studyFileKeys are the keys a study file may hold.
var studyFileKeys = []string{"name", "tasks", "level", "size", "device", "model", "backend", "strategy", "target", "budget", "seed",
	"model.name", "model.config", "backend.name", "backend.config", "strategy.name", "strategy.config", "target.name", "target.config",
	"budget.generations", "budget.evaluations"}

var yamlUnknownField = regexp.MustCompile(`line (\d+): field (\S+) not found in type`)

// studyFileError names the file, and for an unknown key the key probably meant.
func studyFileError(file string, err error) error {
	m := yamlUnknownField.FindStringSubmatch(err.Error())
	if m == nil {
		return fmt.Errorf("study file %s: %w", file, err)
	}
	msg := fmt.Sprintf("study file %s: line %s: unknown key %q", file, m[1], m[2])
	if n := sdk.Nearest(m[2], studyFileKeys); n != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", n)
	}
	return errors.New(msg)
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
	multi := len(rep.Spec.Models) > 0
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if multi {
		fmt.Fprint(tw, "MODEL\t")
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
		case !o.Done:
			status = "not run"
		}
		speed, best, correct := "-", "-", "no"
		if o.Correct {
			correct = "yes"
			speed = fmt.Sprintf("%.2fx", o.BestSpeedup)
			if len(o.BestEval) >= 12 {
				best = o.BestEval[:12]
			}
		}
		if o.Blame != "" {
			correct = "-"
		}
		if reason == "" {
			reason = "-"
		}
		if multi {
			fmt.Fprintf(tw, "%s\t", o.Model)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", o.Task, status, o.Attempts, correct, speed, best, firstLines(reason, 1, 100)[0])
	}
	tw.Flush()
	if multi {
		models, by := study.ByModel(rep.Outcomes)
		for _, m := range models {
			o := by[m]
			fmt.Fprintf(w, "%s: fast_0 %.2f  fast_1 %.2f  fast_1.5 %.2f  fast_2 %.2f  (%d tasks)\n", m,
				study.FastP(o, 0), study.FastP(o, 1), study.FastP(o, 1.5), study.FastP(o, 2), study.Judged(o))
		}
	}
	judged := study.Judged(rep.Outcomes)
	fmt.Fprintf(w, "study %s: fast_0 %.2f  fast_1 %.2f  fast_1.5 %.2f  fast_2 %.2f  (%d tasks", rep.Study,
		study.FastP(rep.Outcomes, 0), study.FastP(rep.Outcomes, 1), study.FastP(rep.Outcomes, 1.5), study.FastP(rep.Outcomes, 2), judged)
	if n := len(rep.Outcomes) - judged; n > 0 {
		fmt.Fprintf(w, "; %d without a verdict about any kernel, left out", n)
	}
	fmt.Fprintln(w, ")")
	if len(rep.ExcludeFlags) > 0 {
		fmt.Fprintf(w, "results flagged %s are left out\n", strings.Join(rep.ExcludeFlags, ", "))
	}
}

func (a *app) studyListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List stored studies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.openStore()
			if err != nil {
				return err
			}
			defer st.Close()
			studies, err := st.Studies()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tCREATED (UTC)\tTASKS DONE")
			for _, s := range studies {
				var spec study.Spec
				_ = json.Unmarshal(s.Spec, &spec)
				units, _ := st.Units(s.ID)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\n", s.ID, s.Name, s.CreatedAt.Format("2006-01-02 15:04"), len(units), len(spec.Tasks)*len(spec.ModelRefs()))
			}
			return tw.Flush()
		},
	}
}

func (a *app) studyShowCmd() *cobra.Command {
	var asJSON bool
	var excludeFlags []string
	cmd := &cobra.Command{
		Use:   "show ID [ID...]",
		Short: "Show a study's outcome per task and its fast_p; several studies side by side",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.openStore()
			if err != nil {
				return err
			}
			defer st.Close()
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
			fmt.Fprintf(a.out, "study %s %s: %s + %s + %s on %s (%s), budget %d generations / %d evaluations\n", s.ID, s.Name,
				modelLabels(spec), spec.Backend.Ref, spec.Strategy.Ref, spec.Target.Ref, spec.Device, spec.Budget.Generations, spec.Budget.Evaluations)
			renderStudy(a.out, reps[0])
			if calls, err := st.Calls(s.ID); err == nil && len(calls) > 0 {
				renderCosts(a.out, gateway.Costs(calls))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (with every attempt and model call, for one study)")
	cmd.Flags().StringSliceVar(&excludeFlags, "exclude-flag", nil, "leave results with this flag out of correctness and fast_p (repeatable)")
	return cmd
}
