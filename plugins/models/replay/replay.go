// Package replay is a model that replays kernels instead of generating them: from a folder (a
// KernelBench run folder included), from the bundled examples, or from the store (through the
// host's Platform), all of a task's kernels or one earlier study's. Studies with it measure the
// platform, the contract and strategies without any model provider; replaying a stored study's
// kernels re-judges them on another target or under a new contract version.
package replay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/kbplatform/kbplatform/examples/kernels"
	"github.com/kbplatform/kbplatform/sdk"
)

// Version of the model.
const Version = "0.1.0"

// Settings of the replay model.
type Settings struct {
	Source  string `json:"source"`            // examples, dir or store
	Dir     string `json:"dir,omitempty"`     // for source dir
	Study   string `json:"study,omitempty"`   // for source store: only this study's kernels (id or prefix)
	Passed  bool   `json:"passed,omitempty"`  // for source store: only kernels that passed
	Backend string `json:"backend,omitempty"` // for source examples: only this backend's kernels
	Device  string `json:"device,omitempty"`  // for source examples: only kernels for this device kind (cpu, cuda)
}

const schema = `{
  "type": "object",
  "properties": {
    "source":  {"enum": ["examples", "dir", "store"]},
    "dir":     {"type": "string"},
    "study":   {"type": "string"},
    "passed":  {"type": "boolean"},
    "backend": {"type": "string"},
    "device":  {"enum": ["cpu", "cuda"]}
  },
  "required": ["source"],
  "additionalProperties": false
}`

// Model implements sdk.Model.
type Model struct {
	mu       sync.Mutex
	s        Settings
	platform sdk.Platform
	byTask   map[string][]string // source files per task id (examples, dir)
	served   map[string]int
}

var _ sdk.Model = (*Model)(nil)

// New returns an unconfigured replay model.
func New() *Model { return &Model{} }

// Info identifies the plugin.
func (*Model) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindModel, Name: "replay", Version: Version, ConfigSchema: schema,
		Capabilities: []string{"n>1", "deterministic"},
		Description:  "replays kernels from a folder, the bundled examples or the store"}
}

// Configure loads the kernels to replay.
func (m *Model) Configure(_ context.Context, c sdk.Configuration) error {
	var s Settings
	if err := c.Decode(&s); err != nil {
		return err
	}
	by := map[string][]string{}
	switch s.Source {
	case "examples":
		entries, err := kernels.Load()
		if err != nil {
			return err
		}
		for _, e := range entries {
			if (s.Backend == "" || e.Backend == s.Backend) && (s.Device == "" || e.Device == s.Device) {
				by[e.Task] = append(by[e.Task], e.Source)
			}
		}
	case "dir":
		if s.Dir == "" {
			return fmt.Errorf("%w: source dir needs dir", sdk.ErrInvalidConfig)
		}
		var err error
		if by, err = loadDir(s.Dir); err != nil {
			return fmt.Errorf("%w: %v", sdk.ErrInvalidConfig, err)
		}
	case "store":
		if c.Platform == nil {
			return fmt.Errorf("%w: source store needs the host's platform", sdk.ErrUnavailable)
		}
	case "":
		return fmt.Errorf("%w: source is required (examples, dir or store)", sdk.ErrInvalidConfig)
	default:
		return fmt.Errorf("%w: source %q (examples, dir or store)", sdk.ErrInvalidConfig, s.Source)
	}
	if s.Source != "store" && (s.Study != "" || s.Passed) {
		return fmt.Errorf("%w: study and passed choose among stored kernels: they need source store", sdk.ErrInvalidConfig)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.s, m.platform, m.byTask, m.served = s, c.Platform, by, map[string]int{}
	return nil
}

// loadDir reads a folder: kernels.yaml (task → files) if present, else files named after tasks
// (the task id with "/" replaced by "__", or the id's last part), optionally numbered: relu.2.py.
func loadDir(dir string) (map[string][]string, error) {
	by := map[string][]string{}
	if b, err := os.ReadFile(filepath.Join(dir, "kernels.yaml")); err == nil {
		var m struct {
			Kernels []struct {
				Task string `yaml:"task"`
				File string `yaml:"file"`
			} `yaml:"kernels"`
		}
		if err := yaml.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "kernels.yaml"), err)
		}
		for _, k := range m.Kernels {
			src, err := os.ReadFile(filepath.Join(dir, k.File))
			if err != nil {
				return nil, err
			}
			by[k.Task] = append(by[k.Task], string(src))
		}
		return by, nil
	}
	if kb, err := loadKernelBenchRun(dir); err != nil || len(kb) > 0 {
		return kb, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".py") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		key := strings.TrimSuffix(n, ".py")
		if i := strings.LastIndexByte(key, '.'); i > 0 {
			key = key[:i]
		}
		src, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		by[strings.ReplaceAll(key, "__", "/")] = append(by[strings.ReplaceAll(key, "__", "/")], string(src))
	}
	return by, nil
}

// sources returns the kernels for a task.
func (m *Model) sources(ctx context.Context, task string) ([]string, error) {
	m.mu.Lock()
	s, p, by := m.s, m.platform, m.byTask
	m.mu.Unlock()
	if s.Source == "store" {
		ks, err := p.StoredKernels(ctx, sdk.KernelQuery{Task: task, Study: s.Study, Passed: s.Passed})
		if err != nil {
			return nil, err
		}
		out := make([]string, len(ks))
		for i, k := range ks {
			out[i] = k.Source
		}
		return out, nil
	}
	if srcs, ok := by[task]; ok {
		return srcs, nil
	}
	// A KernelBench run names its files by level and problem number; the task id of an imported
	// KernelBench problem carries both (kernelbench/l1/19_ReLU).
	if m := kernelBenchTask.FindStringSubmatch(task); m != nil {
		if srcs, ok := by[kernelBenchKey(m[1], m[2])]; ok {
			return srcs, nil
		}
	}
	// By the id's last part: a folder of relu.py answers kbp/l1/relu and kernelbench/l1/relu alike.
	base := task[strings.LastIndexByte(task, '/')+1:]
	for id, srcs := range by {
		if id == base {
			return srcs, nil
		}
	}
	return nil, nil
}

// Generate returns the task's kernels as fenced code, in order, cycling when asked for more.
func (m *Model) Generate(ctx context.Context, req sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	if req.N < 1 {
		return nil, fmt.Errorf("%w: n must be at least 1", sdk.ErrInvalidArgument)
	}
	if req.TaskID == "" {
		return nil, fmt.Errorf("%w: replay needs the task id", sdk.ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	srcs, err := m.sources(ctx, req.TaskID)
	if err != nil {
		return nil, err
	}
	if len(srcs) == 0 {
		return nil, fmt.Errorf("%w: no kernel to replay for %s (source %s)", sdk.ErrNotFound, req.TaskID, m.s.Source)
	}
	m.mu.Lock()
	start := m.served[req.TaskID]
	m.served[req.TaskID] = start + req.N
	m.mu.Unlock()
	resp := &sdk.GenerateResponse{Model: "replay:" + m.s.Source}
	for i := 0; i < req.N; i++ {
		src := srcs[(start+i)%len(srcs)]
		resp.Completions = append(resp.Completions, sdk.Completion{Text: "```python\n" + strings.TrimRight(src, "\n") + "\n```\n", FinishReason: "stop"})
	}
	return resp, nil
}

// A KernelBench run folder (runs/NAME) holds level_L_problem_P_sample_S_kernel.py files.
var (
	kernelBenchFile = regexp.MustCompile(`^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$`)
	kernelBenchTask = regexp.MustCompile(`^kernelbench/l(\d+)/0*(\d+)_`)
)

func kernelBenchKey(level, problem string) string {
	l, _ := strconv.Atoi(level)
	p, _ := strconv.Atoi(problem)
	return fmt.Sprintf("kernelbench-run/%d/%d", l, p)
}

// loadKernelBenchRun reads a KernelBench run folder (and its subfolders, one per level in some
// layouts), samples in order; nothing when the folder is not one.
func loadKernelBenchRun(dir string) (map[string][]string, error) {
	type sample struct {
		key string
		n   int
		src string
	}
	var samples []sample
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		m := kernelBenchFile.FindStringSubmatch(d.Name())
		if d.IsDir() || m == nil {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(m[3])
		samples = append(samples, sample{key: kernelBenchKey(m[1], m[2]), n: n, src: string(src)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(samples, func(i, j int) bool { return samples[i].n < samples[j].n })
	by := map[string][]string{}
	for _, s := range samples {
		by[s.key] = append(by[s.key], s.src)
	}
	return by, nil
}
