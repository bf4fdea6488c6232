// Package cutlass is the CUTLASS/CuTe backend: CUDA kernels built from NVIDIA's CUTLASS templates
// and CuTe layouts with torch.utils.cpp_extension.load_inline, against a CUTLASS checkout the user
// points it to (cutlass_path).
package cutlass

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/kbplatform/kbplatform/plugins/backends/cuda"
	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/kernellang"
)

// Version of the backend.
const Version = "0.1.0"

//go:embed prompts/*.md prompts/*.txt
var files embed.FS

// RuleFile is the backend's static rules.
//
//go:embed rules.yaml
var RuleFile []byte

// Settings of the backend.
type Settings struct {
	kernellang.Settings
	// CutlassPath is a checkout of github.com/NVIDIA/cutlass (only its include/ is needed);
	// default $CUTLASS_PATH.
	CutlassPath string `json:"cutlass_path,omitempty"`
}

const schema = `{"type": "object", "properties": {` + kernellang.SettingsSchema + `,
  "cutlass_path": {"type": "string", "description": "a CUTLASS checkout holding include/cutlass/cutlass.h (default $CUTLASS_PATH)"}},
  "additionalProperties": false}`

// Backend implements sdk.Backend.
type Backend struct {
	*kernellang.Backend
	mu   sync.Mutex
	path string
}

var _ sdk.Backend = (*Backend)(nil)

// New returns the backend.
func New() *Backend {
	prompts, _ := fs.Sub(files, "prompts")
	return &Backend{Backend: kernellang.MustNew(kernellang.Language{Name: "cutlass", Display: "CUTLASS/CuTe", Version: Version,
		Device: "cuda", Description: "CUTLASS and CuTe kernels through load_inline (needs cutlass_path)",
		Prompts: prompts, Rules: RuleFile})}
}

// Info adds cutlass_path to the schema.
func (b *Backend) Info() sdk.Info {
	info := b.Backend.Info()
	info.ConfigSchema = schema
	return info
}

// Configure reads the settings and checks a given CUTLASS path at once; a missing one is reported
// when a build needs it (Recipe), so that prompts and checks work without CUTLASS.
func (b *Backend) Configure(_ context.Context, c sdk.Configuration) error {
	var s Settings
	if err := c.Decode(&s); err != nil {
		return err
	}
	if s.CutlassPath != "" {
		if err := checkHeaders(s.CutlassPath); err != nil {
			return fmt.Errorf("%w: %v", sdk.ErrInvalidConfig, err)
		}
	}
	b.Use(s.Settings)
	b.mu.Lock()
	b.path = s.CutlassPath
	b.mu.Unlock()
	return nil
}

// ErrNoCutlass says that no CUTLASS headers were found.
var ErrNoCutlass = errors.New("the cutlass backend needs CUTLASS's headers: set cutlass_path " +
	"(--backend-config '{\"cutlass_path\": \"/path/to/cutlass\"}') or CUTLASS_PATH to a checkout of " +
	"github.com/NVIDIA/cutlass; docs/backends.md says how")

func checkHeaders(path string) error {
	h := filepath.Join(path, "include", "cutlass", "cutlass.h")
	if _, err := os.Stat(h); err != nil {
		return fmt.Errorf("cutlass_path %s: no include/cutlass/cutlass.h there (%v)", path, errors.Unwrap(err))
	}
	return nil
}

// Recipe is the CUDA recipe plus CUTLASS's include directories and the flags CuTe needs.
func (b *Backend) Recipe(_ context.Context, hw *sdk.Hardware) (*sdk.BuildRecipe, error) {
	b.mu.Lock()
	path := b.path
	b.mu.Unlock()
	if path == "" {
		path = os.Getenv("CUTLASS_PATH")
	}
	if path == "" {
		return nil, fmt.Errorf("%w: %w", sdk.ErrInvalidConfig, ErrNoCutlass)
	}
	if err := checkHeaders(path); err != nil {
		return nil, fmt.Errorf("%w: %v; %w", sdk.ErrInvalidConfig, err, ErrNoCutlass)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	r := cuda.Recipe(hw)
	r.IncludePaths = []string{filepath.Join(abs, "include")}
	if util := filepath.Join(abs, "tools", "util", "include"); isDir(util) {
		r.IncludePaths = append(r.IncludePaths, util)
	}
	// PyTorch 2 already compiles extensions as C++17, which CUTLASS 3 needs; a second -std would
	// be an error for nvcc.
	r.CUDAFlags = append(r.CUDAFlags, "--expt-relaxed-constexpr")
	return r, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
