// Package kernels embeds the bundled example kernels and their manifest (kernels.yaml).
package kernels

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed kernels.yaml */*.py
var files embed.FS

// Entry is one bundled kernel.
type Entry struct {
	Task    string `yaml:"task"`
	File    string `yaml:"file"`
	Backend string `yaml:"backend"`
	Device  string `yaml:"device"` // cpu or cuda
	Source  string `yaml:"-"`
	Hash    string `yaml:"-"`
}

// Name is a short label such as softmax/cuda.py.
func (e Entry) Name() string { return "examples/kernels/" + e.File }

// Runs reports whether the kernel runs on device (cpu or cuda:N).
func (e Entry) Runs(device string) bool {
	return strings.HasPrefix(device, e.Device)
}

// Load reads the manifest and every kernel it names.
func Load() ([]Entry, error) {
	b, err := files.ReadFile("kernels.yaml")
	if err != nil {
		return nil, err
	}
	var m struct {
		Kernels []Entry `yaml:"kernels"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("examples/kernels/kernels.yaml: %w", err)
	}
	for i, e := range m.Kernels {
		src, err := files.ReadFile(path.Clean(e.File))
		if err != nil {
			return nil, fmt.Errorf("examples/kernels/kernels.yaml names %s: %w", e.File, err)
		}
		h := sha256.Sum256(src)
		m.Kernels[i].Source = string(src)
		m.Kernels[i].Hash = hex.EncodeToString(h[:])
	}
	return m.Kernels, nil
}
