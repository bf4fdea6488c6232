// Package cpp is the C++ (CPU) backend: kernels written as C++ functions compiled with
// torch.utils.cpp_extension.load_inline(cpp_sources=...) and called from ModelNew.
package cpp

import (
	"context"
	"embed"
	"io/fs"

	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/kernellang"
)

// Version of the backend.
const Version = "0.2.0"

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
	return &Backend{kernellang.MustNew(kernellang.Language{Name: "cpp", Display: "C++", Version: Version, Device: "cpu",
		Description: "C++ CPU kernels through torch.utils.cpp_extension.load_inline",
		Prompts:     prompts, Rules: RuleFile})}
}

// Recipe builds with OpenMP (the contract's OMP_NUM_THREADS still bounds the threads) and two
// parallel compiler jobs.
func (*Backend) Recipe(_ context.Context, _ *sdk.Hardware) (*sdk.BuildRecipe, error) {
	return &sdk.BuildRecipe{Env: map[string]string{"MAX_JOBS": "2"}, CFlags: []string{"-fopenmp"}, LDFlags: []string{"-fopenmp"}}, nil
}
