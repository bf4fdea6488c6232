// Package cuda is the CUDA backend: kernels written as CUDA C++ and built with
// torch.utils.cpp_extension.load_inline(cuda_sources=...) for the target GPU's architecture.
package cuda

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
	return &Backend{kernellang.MustNew(kernellang.Language{Name: "cuda", Display: "CUDA", Version: Version, Device: "cuda",
		Description: "CUDA C++ kernels through torch.utils.cpp_extension.load_inline",
		Prompts:     prompts, Rules: RuleFile})}
}

// Recipe builds for the target's GPU architectures.
func (*Backend) Recipe(_ context.Context, hw *sdk.Hardware) (*sdk.BuildRecipe, error) {
	return Recipe(hw), nil
}

// Recipe is the build of CUDA extensions, shared with backends that build CUDA too: optimised,
// for the compute capabilities the target reported (TORCH_CUDA_ARCH_LIST), with a bounded number
// of parallel compiler jobs.
func Recipe(hw *sdk.Hardware) *sdk.BuildRecipe {
	r := &sdk.BuildRecipe{Env: map[string]string{"MAX_JOBS": "4"}, CUDAFlags: []string{"-O3"}}
	if arch := kernellang.CUDAArchList(hw); arch != "" {
		r.Env["TORCH_CUDA_ARCH_LIST"] = arch
	}
	return r
}
