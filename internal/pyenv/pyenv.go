// Package pyenv finds the Python interpreter that runs the contract worker.
//
// The first python3 on PATH is often not the one with torch (pyenv shims, system Pythons), so
// unless one is configured, candidates are probed in order and the first that imports torch wins.
package pyenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ErrNoTorch means no probed interpreter could import torch.
var ErrNoTorch = errors.New("no python interpreter with torch found")

// Python is an interpreter known to import torch.
type Python struct {
	Path         string `json:"path"`
	Version      string `json:"python"`
	Torch        string `json:"torch"`
	CUDA         string `json:"cuda"`
	CUDAAvail    bool   `json:"cuda_available"`
	DeviceCount  int    `json:"device_count"`
	Capability   string `json:"capability"`
	TorchCompile bool   `json:"torch_compile"`
	GPUs         []GPU  `json:"gpus"`
	// Paths are the folders the interpreter reads its standard library, packages and torch from
	// (prefixes, site-packages, PYTHONPATH): what a sandboxed worker must be able to read.
	Paths []string `json:"paths"`
}

// GPU is one CUDA device as torch sees it.
type GPU struct {
	Name            string `json:"name"`
	Capability      string `json:"capability"`
	MemoryBytes     int64  `json:"memory_bytes"`
	Multiprocessors int    `json:"multiprocessors"`
}

const probeScript = `
import json, sys
import torch
d = {"python": "%d.%d.%d" % sys.version_info[:3], "torch": torch.__version__,
     "cuda": getattr(torch.version, "cuda", None) or "", "cuda_available": torch.cuda.is_available(),
     "device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
     "capability": "", "torch_compile": hasattr(torch, "compile")}
d["gpus"] = []
if d["cuda_available"]:
    d["capability"] = "%d.%d" % torch.cuda.get_device_capability(0)
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        d["gpus"].append({"name": p.name, "capability": "%d.%d" % (p.major, p.minor),
                          "memory_bytes": p.total_memory, "multiprocessors": p.multi_processor_count})
import os, site
paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, getattr(sys, "base_exec_prefix", ""),
         os.path.dirname(os.path.realpath(sys.executable)), os.path.dirname(os.path.dirname(torch.__file__))}
paths.update(p for p in sys.path if os.path.isabs(p))  # under -c, "" is the folder it ran in: not a path of Python's
for f in ("getsitepackages", "getusersitepackages"):
    try:
        got = getattr(site, f)()
        paths.update([got] if isinstance(got, str) else got)
    except Exception:
        pass
d["paths"] = sorted(p for p in paths if p and os.path.exists(p))
print("KBP_PROBE" + json.dumps(d))
`

// Candidates lists the interpreters probed when none is configured, in order.
func Candidates() []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if p == "" || seen[p] {
			return
		}
		seen[p] = true
		out = append(out, p)
	}
	if p, err := exec.LookPath("python3"); err == nil {
		add(p)
	}
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3", "/opt/torch/.venv/bin/python3", "/opt/conda/bin/python3"} {
		if _, err := os.Stat(p); err == nil {
			add(p)
		}
	}
	if p, err := exec.LookPath("python"); err == nil {
		add(p)
	}
	return out
}

// Probe runs path and reports what it offers; it fails if torch does not import.
func Probe(ctx context.Context, path string) (*Python, error) {
	ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-c", probeScript)
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		return nil, fmt.Errorf("%s cannot import torch: %s", path, msg)
	}
	s := string(out)
	i := strings.LastIndex(s, "KBP_PROBE")
	if i < 0 {
		return nil, fmt.Errorf("%s: unexpected probe output", path)
	}
	var p Python
	if err := json.Unmarshal([]byte(strings.TrimSpace(s[i+len("KBP_PROBE"):])), &p); err != nil {
		return nil, fmt.Errorf("%s: probe output: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err == nil {
		path = abs
	}
	p.Path = path
	return &p, nil
}

// Find returns the configured interpreter, or the first candidate that imports torch.
func Find(ctx context.Context, configured string) (*Python, error) {
	if configured != "" {
		p, err := Probe(ctx, configured)
		if err != nil {
			return nil, fmt.Errorf("configured python: %w", err)
		}
		return p, nil
	}
	var tried []string
	for _, c := range Candidates() {
		p, err := Probe(ctx, c)
		if err == nil {
			return p, nil
		}
		tried = append(tried, c)
	}
	return nil, fmt.Errorf("%w (tried %s); install torch (Debian: apt-get install python3-torch) or set --python / KBP_PYTHON",
		ErrNoTorch, strings.Join(tried, ", "))
}
