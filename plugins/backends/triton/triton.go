// Package triton is the Triton backend: kernels written in Triton's Python DSL, compiled by Triton
// on their first launch.
package triton

import (
	"context"
	"embed"
	"io/fs"

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

// Backend implements sdk.Backend.
type Backend struct {
	*kernellang.Backend
}

var _ sdk.Backend = (*Backend)(nil)

// New returns the backend.
func New() *Backend {
	prompts, _ := fs.Sub(files, "prompts")
	return &Backend{kernellang.MustNew(kernellang.Language{Name: "triton", Display: "Triton", Version: Version, Device: "cuda",
		Description: "Triton kernels, compiled on their first launch",
		Prompts:     prompts, Rules: RuleFile})}
}

// Recipe has nothing to build ahead: Triton compiles a kernel for the GPU it is launched on, on its
// first launch (the contract classes a failure there as compile_error), into the target's
// TRITON_CACHE_DIR. The architecture list still goes along for candidates that mix in a
// load_inline extension.
func (*Backend) Recipe(_ context.Context, hw *sdk.Hardware) (*sdk.BuildRecipe, error) {
	r := &sdk.BuildRecipe{Env: map[string]string{}}
	if arch := kernellang.CUDAArchList(hw); arch != "" {
		r.Env["TORCH_CUDA_ARCH_LIST"] = arch
	}
	return r, nil
}
