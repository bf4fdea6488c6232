// Package registry loads tasks: the bundled suite, imported KernelBench tasks and ad hoc files.
//
// A task is a KernelBench-format Python file plus optional metadata (NAME.yaml). Sizes are
// applied by rewriting the file's top-level constant lines, so the text a model is shown and the
// text the harness runs are the same (docs/tasks.md).
package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kbplatform/kbplatform/internal/contract"
)

// ErrNotFound is returned for an unknown task id.
var ErrNotFound = errors.New("task not found")

// ErrInvalid marks a task file or metadata file that breaks the format.
var ErrInvalid = errors.New("invalid task")

// Origins of tasks.
const (
	OriginSuite       = "suite"
	OriginKernelBench = "kernelbench"
	OriginFile        = "file"
)

// DefaultSize is the size every task has: the file as written.
const DefaultSize = "default"

// Meta is the content of NAME.yaml.
type Meta struct {
	Name          string                    `yaml:"name" json:"name"`
	Level         int                       `yaml:"level" json:"level"`
	Tags          []string                  `yaml:"tags" json:"tags,omitempty"`
	Dtype         string                    `yaml:"dtype" json:"dtype,omitempty"`
	Sizes         map[string]map[string]any `yaml:"sizes" json:"sizes,omitempty"`
	Distributions []string                  `yaml:"distributions" json:"distributions,omitempty"`
	Tolerance     *contract.Tolerance       `yaml:"tolerance" json:"tolerance,omitempty"`
	Strides       string                    `yaml:"strides" json:"strides,omitempty"`
	TimeoutS      int                       `yaml:"timeout_s" json:"timeout_s,omitempty"`
	Notes         string                    `yaml:"notes" json:"notes,omitempty"`
}

// Task is one loaded task.
type Task struct {
	ID     string `json:"id"`
	Origin string `json:"origin"`
	Path   string `json:"path"`   // where it was read from (suite-relative for the suite)
	Source string `json:"source"` // the file as written
	Hash   string `json:"hash"`   // sha256 of Source
	Meta   Meta   `json:"meta"`
}

var knownDists = map[string]bool{"default": true, "scaled": true, "offset": true, "uniform": true, "positive": true, "large": true, "sparse": true, "negated": true, "small": true}

var (
	reModel    = regexp.MustCompile(`(?m)^class\s+Model\s*[(:]`)
	reInputs   = regexp.MustCompile(`(?m)^def\s+get_inputs\s*\(`)
	reInit     = regexp.MustCompile(`(?m)^def\s+get_init_inputs\s*\(`)
	reConstant = regexp.MustCompile(`(?m)^([A-Za-z_][A-Za-z0-9_]*)[ \t]*=[ \t]*([^\n]*)$`)
)

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// CheckSource verifies, without running anything, that src has the KernelBench shape.
func CheckSource(name, src string) error {
	var missing []string
	if !reModel.MatchString(src) {
		missing = append(missing, "class Model")
	}
	if !reInputs.MatchString(src) {
		missing = append(missing, "def get_inputs()")
	}
	if !reInit.MatchString(src) {
		missing = append(missing, "def get_init_inputs()")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s does not define %s at top level", ErrInvalid, name, strings.Join(missing, ", "))
	}
	return nil
}

// constants returns the top-level single-line assignments of src.
func constants(src string) map[string]string {
	out := map[string]string{}
	for _, m := range reConstant.FindAllStringSubmatch(src, -1) {
		out[m[1]] = strings.TrimSpace(m[2])
	}
	return out
}

// New builds a task from source and optional metadata and validates both.
func New(id, origin, p, src string, meta Meta) (*Task, error) {
	if err := CheckSource(p, src); err != nil {
		return nil, err
	}
	t := &Task{ID: id, Origin: origin, Path: p, Source: src, Hash: sha(src), Meta: meta}
	if err := t.checkMeta(); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Task) checkMeta() error {
	consts := constants(t.Source)
	var names []string
	for size := range t.Meta.Sizes {
		names = append(names, size)
	}
	sort.Strings(names)
	for _, size := range names {
		if size == DefaultSize {
			return fmt.Errorf("%w: %s: size name %q is reserved for the file as written", ErrInvalid, t.Path, size)
		}
		for k, v := range t.Meta.Sizes[size] {
			if _, ok := consts[k]; !ok {
				return fmt.Errorf("%w: %s: size %q sets %s, which is not a top-level `%s = ...` line of the file", ErrInvalid, t.Path, size, k, k)
			}
			if _, err := pyLiteral(v); err != nil {
				return fmt.Errorf("%w: %s: size %q, %s: %v", ErrInvalid, t.Path, size, k, err)
			}
		}
	}
	for _, d := range t.Meta.Distributions {
		if !knownDists[d] {
			return fmt.Errorf("%w: %s: unknown input distribution %q", ErrInvalid, t.Path, d)
		}
	}
	switch t.Meta.Strides {
	case "", "any", "contiguous", "exact":
	default:
		return fmt.Errorf("%w: %s: strides must be any, contiguous or exact (got %q)", ErrInvalid, t.Path, t.Meta.Strides)
	}
	if tol := t.Meta.Tolerance; tol != nil && (tol.Atol < 0 || tol.Rtol < 0) {
		return fmt.Errorf("%w: %s: tolerance must not be negative", ErrInvalid, t.Path)
	}
	return nil
}

// Sizes lists the task's sizes, "default" first.
func (t *Task) Sizes() []string {
	out := []string{DefaultSize}
	var rest []string
	for s := range t.Meta.Sizes {
		rest = append(rest, s)
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// HasSize reports whether the task defines size.
func (t *Task) HasSize(size string) bool {
	_, ok := t.Meta.Sizes[size]
	return ok || size == DefaultSize
}

// PickSize resolves "auto" (or "") for a device: cpu → "cpu", cuda → "gpu", else "default".
func (t *Task) PickSize(size, device string) string {
	if size != "" && size != "auto" {
		return size
	}
	want := "cpu"
	if strings.HasPrefix(device, "cuda") {
		want = "gpu"
	}
	if t.HasSize(want) {
		return want
	}
	return DefaultSize
}

// Render returns the task source at a size.
func (t *Task) Render(size string) (string, error) {
	if size == DefaultSize || size == "" {
		return t.Source, nil
	}
	vals, ok := t.Meta.Sizes[size]
	if !ok {
		return "", fmt.Errorf("%w: task %s has no size %q (sizes: %s)", ErrInvalid, t.ID, size, strings.Join(t.Sizes(), ", "))
	}
	out := t.Source
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lit, err := pyLiteral(vals[k])
		if err != nil {
			return "", err
		}
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(k) + `[ \t]*=[^\n]*$`)
		out = re.ReplaceAllLiteralString(out, k+" = "+lit)
	}
	return out, nil
}

// pyLiteral renders a YAML value as Python source. Sequences become tuples.
func pyLiteral(v any) (string, error) {
	switch x := v.(type) {
	case bool:
		if x {
			return "True", nil
		}
		return "False", nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return "", fmt.Errorf("non-finite size value %v", x)
		}
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		return s, nil
	case string:
		return strconv.Quote(x), nil
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			s, err := pyLiteral(e)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		if len(parts) == 1 {
			return "(" + parts[0] + ",)", nil
		}
		return "(" + strings.Join(parts, ", ") + ")", nil
	}
	return "", fmt.Errorf("unsupported size value %v (%T)", v, v)
}

// Contract returns what the contract needs for one size.
func (t *Task) Contract(size string) (contract.Task, error) {
	src, err := t.Render(size)
	if err != nil {
		return contract.Task{}, err
	}
	ct := contract.Task{
		ID:            t.ID,
		Hash:          sha(src),
		Size:          size,
		Source:        src,
		Distributions: t.Meta.Distributions,
		Tolerance:     t.Meta.Tolerance,
		Strides:       t.Meta.Strides,
		Name:          t.Title(),
		Level:         t.Meta.Level,
	}
	if len(ct.Distributions) == 0 {
		ct.Distributions = []string{"default", "scaled"}
	}
	if t.Meta.TimeoutS > 0 {
		ct.Timeout = time.Duration(t.Meta.TimeoutS) * time.Second
	}
	return ct, nil
}

// Title is the human name, falling back to the file stem.
func (t *Task) Title() string {
	if t.Meta.Name != "" {
		return t.Meta.Name
	}
	return strings.TrimSuffix(path.Base(t.Path), ".py")
}

func parseMeta(name string, b []byte) (Meta, error) {
	var m Meta
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	return m, nil
}

// LoadSuite loads the bundled suite: level*/NAME.py with NAME.yaml beside it.
func LoadSuite(fsys fs.FS) ([]*Task, error) {
	var tasks []*Task
	var errs []error
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".py") {
			return err
		}
		dir := path.Dir(p)
		level, ok := levelOf(path.Base(dir))
		if !ok {
			return nil
		}
		src, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		mb, err := fs.ReadFile(fsys, strings.TrimSuffix(p, ".py")+".yaml")
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s has no metadata file (%s)", ErrInvalid, p, strings.TrimSuffix(p, ".py")+".yaml"))
			return nil
		}
		meta, err := parseMeta(strings.TrimSuffix(p, ".py")+".yaml", mb)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		if meta.Level == 0 {
			meta.Level = level
		}
		if meta.Level != level {
			errs = append(errs, fmt.Errorf("%w: %s: metadata says level %d, folder says %d", ErrInvalid, p, meta.Level, level))
			return nil
		}
		stem := strings.TrimSuffix(path.Base(p), ".py")
		t, err := New(fmt.Sprintf("kbp/l%d/%s", level, stem), OriginSuite, p, string(src), meta)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		tasks = append(tasks, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortTasks(tasks)
	return tasks, errors.Join(errs...)
}

func levelOf(dir string) (int, bool) {
	if !strings.HasPrefix(dir, "level") {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(dir, "level"))
	return n, err == nil && n > 0
}

func sortTasks(tasks []*Task) {
	sort.Slice(tasks, func(i, j int) bool {
		if tasks[i].Meta.Level != tasks[j].Meta.Level {
			return tasks[i].Meta.Level < tasks[j].Meta.Level
		}
		return tasks[i].ID < tasks[j].ID
	})
}

// LoadFile loads an ad hoc task file (with NAME.yaml beside it when present).
func LoadFile(p string) (*Task, error) {
	src, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var meta Meta
	if mb, err := os.ReadFile(strings.TrimSuffix(p, ".py") + ".yaml"); err == nil {
		if meta, err = parseMeta(strings.TrimSuffix(p, ".py")+".yaml", mb); err != nil {
			return nil, err
		}
	}
	stem := strings.TrimSuffix(filepath.Base(p), ".py")
	abs, _ := filepath.Abs(p)
	return New("file/"+stem, OriginFile, abs, string(src), meta)
}

// Registry resolves task ids.
type Registry struct {
	tasks []*Task
	byID  map[string]*Task
}

// NewRegistry indexes tasks; later tasks with the same id replace earlier ones.
func NewRegistry(tasks ...[]*Task) *Registry {
	r := &Registry{byID: map[string]*Task{}}
	for _, list := range tasks {
		for _, t := range list {
			r.Add(t)
		}
	}
	return r
}

// Add inserts or replaces a task.
func (r *Registry) Add(t *Task) {
	if _, ok := r.byID[t.ID]; !ok {
		r.tasks = append(r.tasks, t)
	} else {
		for i, old := range r.tasks {
			if old.ID == t.ID {
				r.tasks[i] = t
			}
		}
	}
	r.byID[t.ID] = t
	sortTasks(r.tasks)
}

// Get returns a task by id, or loads it from a file path.
func (r *Registry) Get(id string) (*Task, error) {
	if t, ok := r.byID[id]; ok {
		return t, nil
	}
	if strings.HasSuffix(id, ".py") {
		if _, err := os.Stat(id); err == nil {
			return LoadFile(id)
		}
	}
	var near []string
	for _, t := range r.tasks {
		if strings.Contains(t.ID, id) {
			near = append(near, t.ID)
		}
	}
	if len(near) == 1 {
		return r.byID[near[0]], nil
	}
	if len(near) > 1 {
		if len(near) > 8 {
			near = append(near[:8], "...")
		}
		return nil, fmt.Errorf("%w: %q is ambiguous: %s", ErrNotFound, id, strings.Join(near, ", "))
	}
	return nil, fmt.Errorf("%w: %q (see `kbplatform tasks list`)", ErrNotFound, id)
}

// Filter selects tasks.
type Filter struct {
	Level  int
	Tag    string
	Origin string
}

// List returns the tasks matching f, ordered by level then id.
func (r *Registry) List(f Filter) []*Task {
	var out []*Task
	for _, t := range r.tasks {
		if f.Level != 0 && t.Meta.Level != f.Level {
			continue
		}
		if f.Origin != "" && t.Origin != f.Origin {
			continue
		}
		if f.Tag != "" {
			found := false
			for _, tag := range t.Meta.Tags {
				if tag == f.Tag {
					found = true
				}
			}
			if !found {
				continue
			}
		}
		out = append(out, t)
	}
	return out
}
