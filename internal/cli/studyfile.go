package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kbplatform/kbplatform/internal/registry"
	"github.com/kbplatform/kbplatform/internal/study"
	"github.com/kbplatform/kbplatform/sdk"
)

// studyFile is the YAML form of a study (`study run FILE.yaml`, or --file); flags override it.
// A singular key (model, backend, strategy, target, seed) gives the study one of that part; the
// plural one (models, backends, strategies, targets, seeds) several, and the study runs the cross
// product of all of them on every task: one arm per combination.
type studyFile struct {
	Name        string             `yaml:"name"`
	Tasks       taskSelection      `yaml:"tasks"`
	Level       int                `yaml:"level"`
	Size        string             `yaml:"size"`
	Device      string             `yaml:"device"`
	Model       pluginSetting      `yaml:"model"`
	Models      []pluginSetting    `yaml:"models"`
	Backend     pluginSetting      `yaml:"backend"`
	Backends    []pluginSetting    `yaml:"backends"`
	Strategy    pluginSetting      `yaml:"strategy"`
	Strategies  []pluginSetting    `yaml:"strategies"`
	Target      pluginSetting      `yaml:"target"`
	Targets     []pluginSetting    `yaml:"targets"`
	Budget      budgetSetting      `yaml:"budget"`
	StudyBudget studyBudgetSetting `yaml:"study_budget"`
	Seed        int64              `yaml:"seed"`
	Seeds       []int64            `yaml:"seeds"`
	Parallel    int                `yaml:"parallel"`
}

// pluginSetting names a plugin and its settings. Name is the plugin (or, for a model, a named
// configuration of kbplatform.yaml); with Ref it is instead the label the study's records use for
// this configuration of plugin Ref (`{name: refine-GE, ref: refine, config: {...}}`).
type pluginSetting struct {
	Name   string         `yaml:"name"`
	Ref    string         `yaml:"ref"`
	Config map[string]any `yaml:"config"`
}

type budgetSetting struct {
	Generations int     `yaml:"generations"`
	Evaluations int     `yaml:"evaluations"`
	Tokens      int64   `yaml:"tokens"`
	Seconds     float64 `yaml:"seconds"`
	CostUSD     float64 `yaml:"cost_usd"`
}

type studyBudgetSetting struct {
	Seconds float64 `yaml:"seconds"`
	CostUSD float64 `yaml:"cost_usd"`
}

// taskSelection is `tasks:` — a list of ids, or ids, levels, tags and an origin (suite,
// kernelbench or an --origin name of `tasks import`) whose tasks are all taken.
type taskSelection struct {
	IDs    []string `yaml:"ids"`
	Levels []int    `yaml:"levels"`
	Tags   []string `yaml:"tags"`
	Origin string   `yaml:"origin"`
}

var taskSelectionKeys = []string{"ids", "levels", "tags", "origin"}

// UnmarshalYAML takes a list of ids or a mapping, strictly: a custom unmarshaler does not inherit
// the decoder's KnownFields, so unknown keys are looked for here.
func (t *taskSelection) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.SequenceNode {
		return n.Decode(&t.IDs)
	}
	if n.Kind != yaml.MappingNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: tasks is a list of ids or a mapping (ids, levels, tags, origin)", n.Line)}}
	}
	var errs []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !slices.Contains(taskSelectionKeys, k.Value) {
			errs = append(errs, fmt.Sprintf("line %d: field %s not found in type cli.taskSelection", k.Line, k.Value))
		}
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	type plain taskSelection
	return n.Decode((*plain)(t))
}

func (t taskSelection) empty() bool {
	return len(t.IDs) == 0 && len(t.Levels) == 0 && len(t.Tags) == 0 && t.Origin == ""
}

// resolve lists the selected tasks: the ids, then every task of the origin (suite unless named)
// at one of the levels and with one of the tags, each once, in registry order.
func (t taskSelection) resolve(reg *registry.Registry) ([]string, error) {
	out := slices.Clone(t.IDs)
	seen := map[string]bool{}
	for _, id := range out {
		seen[id] = true
	}
	if len(t.Levels) == 0 && len(t.Tags) == 0 && t.Origin == "" {
		return out, nil
	}
	origin := t.Origin
	if origin == "" {
		origin = registry.OriginSuite
	}
	n := 0
	for _, task := range reg.List(registry.Filter{Origin: origin}) {
		if len(t.Levels) > 0 && !slices.Contains(t.Levels, task.Meta.Level) {
			continue
		}
		if len(t.Tags) > 0 && !slices.ContainsFunc(task.Meta.Tags, func(tag string) bool { return slices.Contains(t.Tags, tag) }) {
			continue
		}
		n++
		if !seen[task.ID] {
			seen[task.ID] = true
			out = append(out, task.ID)
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("no %s task matches levels %v and tags %v (see `kbplatform tasks list`)", origin, t.Levels, t.Tags)
	}
	return out, nil
}

// readStudyFile decodes a study file strictly and checks what YAML alone cannot.
func readStudyFile(file string) (studyFile, error) {
	var f studyFile
	b, err := os.ReadFile(file)
	if err != nil {
		return f, err
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return f, studyFileError(file, string(b), err)
	}
	both := func(one, many string, hasOne, hasMany bool) error {
		if hasOne && hasMany {
			return fmt.Errorf("study file %s: %s and %s both given: use %s for one, %s for several", file, one, many, one, many)
		}
		return nil
	}
	for _, e := range []error{
		both("model", "models", f.Model.Name != "" || f.Model.Ref != "", len(f.Models) > 0),
		both("backend", "backends", f.Backend.Name != "" || f.Backend.Ref != "", len(f.Backends) > 0),
		both("strategy", "strategies", f.Strategy.Name != "" || f.Strategy.Ref != "", len(f.Strategies) > 0),
		both("target", "targets", f.Target.Name != "" || f.Target.Ref != "", len(f.Targets) > 0),
		both("seed", "seeds", f.Seed != 0, len(f.Seeds) > 0),
		both("level", "tasks.levels", f.Level != 0, len(f.Tasks.Levels) > 0),
	} {
		if e != nil {
			return f, e
		}
	}
	for kind, list := range map[string][]pluginSetting{"models": f.Models, "backends": f.Backends, "strategies": f.Strategies, "targets": f.Targets} {
		for i, p := range list {
			if p.Name == "" && p.Ref == "" {
				return f, fmt.Errorf("study file %s: %s[%d] names no plugin (name:, or ref: with a name for its records)", file, kind, i)
			}
		}
	}
	if dup := duplicate(f.Seeds); dup != "" {
		return f, fmt.Errorf("study file %s: seed %s is listed twice", file, dup)
	}
	if f.Parallel < 0 {
		return f, fmt.Errorf("study file %s: parallel is %d; it counts units run at once (1 or more)", file, f.Parallel)
	}
	b2 := f.Budget
	if b2.Generations < 0 || b2.Evaluations < 0 || b2.Tokens < 0 || b2.Seconds < 0 || b2.CostUSD < 0 || f.StudyBudget.Seconds < 0 || f.StudyBudget.CostUSD < 0 {
		return f, fmt.Errorf("study file %s: a budget is negative; 0 means unlimited", file)
	}
	return f, nil
}

func duplicate(seeds []int64) string {
	seen := map[int64]bool{}
	for _, s := range seeds {
		if seen[s] {
			return strconv.FormatInt(s, 10)
		}
		seen[s] = true
	}
	return ""
}

// arms reports whether the file uses the cross-product form (a plural key other than models):
// such a study is one study of several arms, where `backend: cpp,cuda` runs one study per
// backend as it did before arms.
func (f studyFile) arms() bool {
	return len(f.Backends) > 0 || len(f.Strategies) > 0 || len(f.Targets) > 0 || len(f.Seeds) > 0
}

// plainRef turns a backend, strategy or target setting into a plugin reference: Ref is the
// plugin when given (Name then labels it), else Name; def when neither.
func (p pluginSetting) plainRef(kind, def string) (study.PluginRef, error) {
	plugin, label := p.Name, ""
	if p.Ref != "" {
		plugin, label = p.Ref, p.Name
	}
	if plugin == "" {
		plugin = def
	}
	if !strings.Contains(plugin, "/") {
		plugin = kind + "/" + plugin
	}
	r := study.PluginRef{Ref: plugin, Name: label}
	if p.Config != nil {
		b, err := json.Marshal(p.Config)
		if err != nil {
			return r, fmt.Errorf("%s %s settings: %w", kind, plugin, err)
		}
		r.Config = b
	}
	return r, nil
}

// plainRefs resolves a list of settings, each label once.
func plainRefs(kind string, list []pluginSetting) ([]study.PluginRef, error) {
	var out []study.PluginRef
	seen := map[string]bool{}
	for _, p := range list {
		r, err := p.plainRef(kind, "")
		if err != nil {
			return nil, err
		}
		if seen[r.Label()] {
			return nil, fmt.Errorf("%s %q is listed twice: give each configuration its own name (name: LABEL, ref: PLUGIN)", kind, r.Label())
		}
		seen[r.Label()] = true
		out = append(out, r)
	}
	return out, nil
}

// studyFileKeys are the keys a study file may hold.
var studyFileKeys = []string{"name", "tasks", "level", "size", "device", "model", "models", "backend", "backends", "strategy",
	"strategies", "target", "targets", "budget", "study_budget", "seed", "seeds", "parallel",
	"tasks.ids", "tasks.levels", "tasks.tags", "tasks.origin",
	"model.name", "model.ref", "model.config", "models.name", "models.ref", "models.config",
	"backend.name", "backend.ref", "backend.config", "backends.name", "backends.ref", "backends.config",
	"strategy.name", "strategy.ref", "strategy.config", "strategies.name", "strategies.ref", "strategies.config",
	"target.name", "target.ref", "target.config", "targets.name", "targets.ref", "targets.config",
	"budget.generations", "budget.evaluations", "budget.tokens", "budget.seconds", "budget.cost_usd",
	"study_budget.seconds", "study_budget.cost_usd"}

var yamlUnknownField = regexp.MustCompile(`line (\d+): field (\S+) not found in type`)

// studyFileError names the file, and for an unknown key its line and the key probably meant,
// looked for first among the keys of the section it sits in.
func studyFileError(file, text string, err error) error {
	m := yamlUnknownField.FindStringSubmatch(err.Error())
	if m == nil {
		return fmt.Errorf("study file %s: %w", file, err)
	}
	line, _ := strconv.Atoi(m[1])
	msg := fmt.Sprintf("study file %s: line %s: unknown key %q", file, m[1], m[2])
	known := studyFileKeys
	if sec := sectionOf(text, line); sec != "" {
		var in []string
		for _, k := range studyFileKeys {
			if strings.HasPrefix(k, sec+".") {
				in = append(in, k)
			}
		}
		if len(in) > 0 {
			known = in
		}
	}
	if n := sdk.Nearest(m[2], known); n != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", n)
	}
	return errors.New(msg)
}

// sectionOf is the top-level key a line of the file sits under ("" at the top level).
func sectionOf(text string, line int) string {
	lines := strings.Split(text, "\n")
	if line < 1 || line > len(lines) {
		return ""
	}
	indent := func(s string) int { return len(s) - len(strings.TrimLeft(s, " -")) }
	if indent(lines[line-1]) == 0 {
		return ""
	}
	for i := line - 2; i >= 0; i-- {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") || indent(l) > 0 {
			continue
		}
		k, _, _ := strings.Cut(l, ":")
		return strings.TrimSpace(k)
	}
	return ""
}

// ref is plainRef with settings from a flag taking precedence over the file's.
func (p pluginSetting) ref(kind, def string, cfg json.RawMessage) study.PluginRef {
	r, _ := p.plainRef(kind, def) // settings decoded from YAML always encode as JSON
	if cfg != nil {
		r.Config = cfg
	}
	return r
}
