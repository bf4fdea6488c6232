// Package local is the local target: the CPU and the NVIDIA GPUs of this host, running the
// contract of internal/contract. With cgo it reads the GPU fingerprint through NVML (the
// kbplugin-target-local binary); without it, through nvidia-smi.
package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/kbplatform/kbplatform/internal/contract"
	"github.com/kbplatform/kbplatform/internal/pyenv"
	"github.com/kbplatform/kbplatform/internal/sandbox"
	"github.com/kbplatform/kbplatform/sdk"
)

// Version of the local target.
const Version = "0.1.0"

// Settings are the local target's configuration.
type Settings struct {
	Python   string `json:"python,omitempty"`
	WorkDir  string `json:"work_dir,omitempty"`
	CacheDir string `json:"cache_dir,omitempty"`
	// Sandbox is how much of the kernels' sandbox to insist on: best-effort (default), require
	// (refuse evaluations where it cannot be applied whole) or off (the environment allowlist alone).
	Sandbox string `json:"sandbox,omitempty"`
}

const schema = `{
  "type": "object",
  "properties": {
    "python":    {"type": "string", "description": "interpreter with torch (default: the first found)"},
    "work_dir":  {"type": "string", "description": "scratch folder for output dumps (a tmpfs is best)"},
    "cache_dir": {"type": "string", "description": "kernel build cache and the extracted worker"},
    "sandbox":   {"type": "string", "enum": ["", "best-effort", "require", "off"], "description": "require: refuse to run kernels where the sandbox cannot be applied whole; off: the environment allowlist alone"}
  },
  "additionalProperties": false
}`

// Target runs evaluations on this host.
type Target struct {
	mu   sync.Mutex
	py   *pyenv.Python
	ev   *contract.Evaluator
	sets Settings
}

var _ sdk.Target = (*Target)(nil)

// New returns an unconfigured local target.
func New() *Target { return &Target{} }

// Info identifies the plugin.
func (t *Target) Info() sdk.Info {
	caps := []string{"cpu", "cuda", "contract:" + contract.Version, "compile", "baseline", "validate"}
	if nvmlAvailable {
		caps = append(caps, "nvml")
	}
	return sdk.Info{Kind: sdk.KindTarget, Name: "local", Version: Version, Capabilities: caps, ConfigSchema: schema,
		Description: "the CPU and NVIDIA GPUs of this host, evaluated by the hardened contract"}
}

// Configure finds Python and prepares the evaluator.
func (t *Target) Configure(ctx context.Context, c sdk.Configuration) error {
	var s Settings
	if err := c.Decode(&s); err != nil {
		return err
	}
	if s.WorkDir == "" {
		s.WorkDir = filepath.Join(os.TempDir(), fmt.Sprintf("kbplatform-%d", os.Getuid()))
	}
	if s.CacheDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		s.CacheDir = filepath.Join(dir, "kbplatform")
	}
	mode, err := sandbox.ParseMode(s.Sandbox)
	if err != nil {
		return fmt.Errorf("%w: %v", sdk.ErrInvalidArgument, err)
	}
	py, err := pyenv.Find(ctx, s.Python)
	if err != nil {
		return fmt.Errorf("%w: %v", sdk.ErrUnavailable, err)
	}
	ev, err := contract.New(contract.Options{Python: py, WorkDir: s.WorkDir, CacheDir: s.CacheDir, Config: sdk.DefaultConfig(), HostInfo: hostInfo, Sandbox: mode})
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ev != nil {
		t.ev.Close()
	}
	t.py, t.ev, t.sets = py, ev, s
	return nil
}

func (t *Target) evaluator(cfg sdk.Config, progress sdk.Progress, recipe *sdk.BuildRecipe) (*contract.Evaluator, error) {
	t.mu.Lock()
	ev := t.ev
	t.mu.Unlock()
	if ev == nil {
		return nil, fmt.Errorf("%w: the local target is not configured", sdk.ErrUnavailable)
	}
	var p func(string)
	if progress != nil {
		p = func(m string) { progress(m) }
	}
	return ev.With(cfg, p, recipe)
}

func (t *Target) checkDevice(device string) error {
	if device == "cpu" {
		return nil
	}
	if !strings.HasPrefix(device, "cuda") {
		return fmt.Errorf("%w: device %q (the local target has cpu and cuda:N)", sdk.ErrInvalidArgument, device)
	}
	idx := 0
	if i := strings.IndexByte(device, ':'); i >= 0 {
		if _, err := fmt.Sscanf(device[i+1:], "%d", &idx); err != nil {
			return fmt.Errorf("%w: device %q", sdk.ErrInvalidArgument, device)
		}
	}
	if t.py == nil || idx >= t.py.DeviceCount {
		n := 0
		if t.py != nil {
			n = t.py.DeviceCount
		}
		return fmt.Errorf("%w: %s: this host has %d CUDA device(s) visible to torch", sdk.ErrInvalidArgument, device, n)
	}
	return nil
}

// Describe lists the CPU and every GPU torch sees, with NVML's view when available.
func (t *Target) Describe(ctx context.Context) (*sdk.Hardware, error) {
	t.mu.Lock()
	py := t.py
	t.mu.Unlock()
	if py == nil {
		return nil, fmt.Errorf("%w: the local target is not configured", sdk.ErrUnavailable)
	}
	fp := hostInfo("cpu")
	hw := &sdk.Hardware{Target: "local", Fingerprint: fp, Capabilities: t.Info().Capabilities}
	cpuName, _ := fp["cpu_model"].(string)
	hw.Devices = append(hw.Devices, sdk.Device{Name: "cpu", Kind: "cpu", Model: cpuName})
	gpus := nvmlDevices()
	for i, g := range py.GPUs {
		d := sdk.Device{Name: fmt.Sprintf("cuda:%d", i), Kind: "cuda", Model: g.Name, MemoryBytes: g.MemoryBytes,
			ComputeCapability: g.Capability, Multiprocessors: g.Multiprocessors}
		if i < len(gpus) {
			d.Driver = gpus[i].Driver
		}
		hw.Devices = append(hw.Devices, d)
	}
	hw.Fingerprint["torch"] = py.Torch
	hw.Fingerprint["torch_cuda"] = py.CUDA
	return hw, nil
}

// Compile imports the candidate once on the CPU side, filling the build cache.
func (t *Target) Compile(ctx context.Context, req sdk.CompileRequest) (*sdk.CompileResult, error) {
	if err := t.checkDevice(req.Device); err != nil {
		return nil, err
	}
	ev, err := t.evaluator(sdk.DefaultConfig(), nil, req.Recipe)
	if err != nil {
		return nil, err
	}
	return ev.Compile(ctx, req.Task, req.Kernel, req.Device), nil
}

// Evaluate runs the contract.
func (t *Target) Evaluate(ctx context.Context, req sdk.EvaluateRequest, progress sdk.Progress) (*sdk.Result, error) {
	if err := t.checkDevice(req.Device); err != nil {
		return nil, err
	}
	ev, err := t.evaluator(req.Config, progress, req.Recipe)
	if err != nil {
		return nil, err
	}
	return ev.Evaluate(ctx, req.Task, req.Kernel, req.Device, req.Compiled), nil
}

// Baseline times the task's own Model in a mode against eager.
func (t *Target) Baseline(ctx context.Context, req sdk.BaselineRequest, progress sdk.Progress) (*sdk.Result, error) {
	if err := t.checkDevice(req.Device); err != nil {
		return nil, err
	}
	if req.Mode != "eager" && t.py != nil && !t.py.TorchCompile {
		return &sdk.Result{Verdict: sdk.VerdictError, ErrorClass: sdk.ClassHarness, Task: req.Task, Device: req.Device,
			Message: "torch " + t.py.Torch + " has no torch.compile (needs torch >= 2.0)"}, nil
	}
	ev, err := t.evaluator(req.Config, progress, nil)
	if err != nil {
		return nil, err
	}
	return ev.Baseline(ctx, req.Task, req.Device, req.Mode), nil
}

// Validate runs the task's reference alone.
func (t *Target) Validate(ctx context.Context, task sdk.Task, device string, cfg sdk.Config) (*sdk.Validation, error) {
	if err := t.checkDevice(device); err != nil {
		return nil, err
	}
	ev, err := t.evaluator(cfg, nil, nil)
	if err != nil {
		return nil, err
	}
	return ev.Validate(ctx, task, device), nil
}

// Close ends the reference processes.
func (t *Target) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ev != nil {
		t.ev.Close()
	}
}
