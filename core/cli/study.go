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

	"github.com/kbplatform/kbplatform/core/registry"
	"github.com/kbplatform/kbplatform/core/study"
	"github.com/kbplatform/kbplatform/sdk"
)

func (a *app) studyCmd() *cobra.Command {
	cmd := groupCmd("study", "Run studies (tasks × model × backend × strategy × target) through plugins")
	cmd.AddCommand(a.studyRunCmd(), a.studyListCmd(), a.studyShowCmd())
	return cmd
}

// studyFile is the YAML form of a study (`study run --file`); flags override it.
type studyFile struct {
	Name     string        `yaml:"name"`
	Tasks    []string      `yaml:"tasks"`
	Level    int           `yaml:"level"`
	Size     string        `yaml:"size"`
	Device   string        `yaml:"device"`
	Model    pluginSetting `yaml:"model"`
	Backend  pluginSetting `yaml:"backend"`
	Strategy pluginSetting `yaml:"strategy"`
	Target   pluginSetting `yaml:"target"`
	Budget   sdk.Budget    `yaml:"budget"`
	Seed     int64         `yaml:"seed"`
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
	var file, name, model, backend, strategy, modelCfg, backendCfg, strategyCfg string
	var tasks []string
	var level, gens, evals int
	var asJSON bool
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
				f.Model.Name = model
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
			if f.Model.Name == "" && mc == nil {
				return fmt.Errorf("a study needs a model (--model, or model: in --file)")
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
			pm := a.pluginManager()
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
			if targetRef.Ref == "target/local" && targetRef.Config == nil {
				targetRef.Config = a.targetConfig()
			}
			spec := study.Spec{
				Name: f.Name, Tasks: f.Tasks, Size: size, Device: device, Budget: f.Budget, Seed: f.Seed, Contract: a.cfg.Contract,
				ContractVersion: contractVersion,
				Model:           f.Model.ref("model", "", mc),
				Backend:         f.Backend.ref("backend", "cpp", bc),
				Strategy:        f.Strategy.ref("strategy", "oneshot", sc),
				Target:          targetRef,
			}
			a.progress("study %s: %d tasks, %s + %s + %s on %s (%s)", spec.ID(), len(spec.Tasks), spec.Model.Ref, spec.Backend.Ref, spec.Strategy.Ref, spec.Target.Ref, device)
			start := time.Now()
			rep, err := study.Run(a.ctx, spec, study.Deps{Store: st, Registry: reg, Plugins: pm, Progress: func(m string) {
				a.progress("%5.1fs %s", time.Since(start).Seconds(), m)
			}})
			if rep != nil {
				if asJSON {
					_ = printJSON(a.out, rep)
				} else {
					renderStudy(a.out, rep)
				}
			}
			if errors.Is(err, sdk.ErrInvalidConfig) {
				return fmt.Errorf("%s: %w", configSource(err, file, map[string]bool{"model": mc != nil, "backend": bc != nil, "strategy": sc != nil}), err)
			}
			if err != nil {
				return err
			}
			for _, o := range rep.Outcomes {
				if o.Error != "" {
					return exitError{code: 3, msg: "some tasks did not finish; run the same study again to retry them"}
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
	f.StringVar(&model, "model", "", "model plugin (e.g. replay)")
	f.StringVar(&backend, "backend", "", "backend plugin (default cpp)")
	f.StringVar(&strategy, "strategy", "", "strategy plugin (default oneshot)")
	f.StringVar(&modelCfg, "model-config", "", "model settings as JSON")
	f.StringVar(&backendCfg, "backend-config", "", "backend settings as JSON")
	f.StringVar(&strategyCfg, "strategy-config", "", "strategy settings as JSON")
	f.IntVar(&gens, "budget-generations", 0, "model completions per task (0: unlimited)")
	f.IntVar(&evals, "budget-evaluations", 0, "evaluations per task (0: unlimited)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	addContractFlags(cmd)
	return cmd
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
	switch {
	case fromFlag[kind]:
		return "--" + kind + "-config"
	case file != "":
		return file + " (" + kind + ".config)"
	}
	return kind + " settings"
}

func renderStudy(w interface{ Write([]byte) (int, error) }, rep *study.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
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
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", o.Task, status, o.Attempts, correct, speed, best, firstLines(reason, 1, 100)[0])
	}
	tw.Flush()
	judged := study.Judged(rep.Outcomes)
	fmt.Fprintf(w, "study %s: fast_0 %.2f  fast_1 %.2f  fast_1.5 %.2f  fast_2 %.2f  (%d tasks", rep.Study,
		study.FastP(rep.Outcomes, 0), study.FastP(rep.Outcomes, 1), study.FastP(rep.Outcomes, 1.5), study.FastP(rep.Outcomes, 2), judged)
	if n := len(rep.Outcomes) - judged; n > 0 {
		fmt.Fprintf(w, "; %d without a verdict about any kernel, left out", n)
	}
	fmt.Fprintln(w, ")")
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
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\n", s.ID, s.Name, s.CreatedAt.Format("2006-01-02 15:04"), len(units), len(spec.Tasks))
			}
			return tw.Flush()
		},
	}
}

func (a *app) studyShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a study's outcome per task and its fast_p",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.openStore()
			if err != nil {
				return err
			}
			defer st.Close()
			s, err := st.Study(args[0])
			if err != nil {
				return err
			}
			var spec study.Spec
			if err := json.Unmarshal(s.Spec, &spec); err != nil {
				return err
			}
			rep := &study.Report{Study: s.ID, Spec: spec}
			for _, t := range spec.Tasks {
				rep.Outcomes = append(rep.Outcomes, study.TaskOutcome{Task: t})
			}
			if err := study.Summarize(st, rep); err != nil {
				return err
			}
			if asJSON {
				atts, _ := st.Attempts(s.ID, "")
				return printJSON(a.out, map[string]any{"report": rep, "attempts": atts})
			}
			fmt.Fprintf(a.out, "study %s %s: %s + %s + %s on %s (%s), budget %d generations / %d evaluations\n", s.ID, s.Name,
				spec.Model.Ref, spec.Backend.Ref, spec.Strategy.Ref, spec.Target.Ref, spec.Device, spec.Budget.Generations, spec.Budget.Evaluations)
			renderStudy(a.out, rep)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (with every attempt)")
	return cmd
}
