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

//go:embed kernels.yaml flagged/kernels.yaml hostile/kernels.yaml */*.py
var files embed.FS

// Entry is one bundled kernel.
type Entry struct {
	Task    string `yaml:"task"`
	File    string `yaml:"file"`
	Backend string `yaml:"backend"`
	Device  string `yaml:"device"` // cpu or cuda
	// Want is, for a flagged kernel, the flags its result must carry (and no others).
	Want []string `yaml:"want"`
	// Expect and Attack are, for a hostile kernel, the verdict it must get and what it tries.
	Expect *Expect `yaml:"expect"`
	Attack string  `yaml:"attack"`
	Source string  `yaml:"-"`
	Hash   string  `yaml:"-"`
}

// Expect is the verdict (pass or fail) and error class a hostile kernel must get.
type Expect struct {
	Verdict string `yaml:"verdict"`
	Class   string `yaml:"class"`
}

// Name is a short label such as softmax/cuda.py.
func (e Entry) Name() string { return "examples/kernels/" + e.File }

// Runs reports whether the kernel runs on device (cpu or cuda:N).
func (e Entry) Runs(device string) bool {
	return strings.HasPrefix(device, e.Device)
}

// Load reads the manifest and every kernel it names.
func Load() ([]Entry, error) { return load("kernels.yaml") }

// LoadFlagged reads flagged/kernels.yaml: correct kernels written to carry a flag (delegation to
// PyTorch, no kernel of their own, a precision downcast), and the flags each must get. They are
// not among the bundled examples; `kbplatform eval --flagged` runs them.
func LoadFlagged() ([]Entry, error) { return load("flagged/kernels.yaml") }

// LoadHostile reads hostile/kernels.yaml: kernels that each try one escape from the evaluation
// (write the worker, read keys, reach the network, trace the reference, ...), with the verdict each
// must get; `kbplatform eval --hostile` runs them and checks that every one was contained.
func LoadHostile() ([]Entry, error) { return load("hostile/kernels.yaml") }

func load(manifest string) ([]Entry, error) {
	b, err := files.ReadFile(manifest)
	if err != nil {
		return nil, err
	}
	var m struct {
		Kernels []Entry `yaml:"kernels"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("examples/kernels/%s: %w", manifest, err)
	}
	for i, e := range m.Kernels {
		src, err := files.ReadFile(path.Clean(e.File))
		if err != nil {
			return nil, fmt.Errorf("examples/kernels/%s names %s: %w", manifest, e.File, err)
		}
		h := sha256.Sum256(src)
		m.Kernels[i].Source = string(src)
		m.Kernels[i].Hash = hex.EncodeToString(h[:])
	}
	return m.Kernels, nil
}
