package sandbox

import (
	"slices"
	"strings"

	"github.com/kbplatform/kbplatform/sdk/secret"
)

// allowedNames pass from the caller's environment as they are: what Python, torch, the CUDA
// toolkit and the compilers read.
var allowedNames = []string{
	"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME",
	"LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME",
	"CC", "CXX", "CUDAHOSTCXX", "MAX_JOBS",
	"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS",
}

// allowedPrefixes pass too: the families of settings of the libraries a kernel uses.
var allowedPrefixes = []string{
	"LC_", "CUDA_", "NVIDIA_", "NVCC_", "CUDNN_", "CUTLASS_", "TORCH_", "TORCHINDUCTOR_", "PYTORCH_",
	"TRITON_", "OMP_", "GOMP_", "KMP_", "MKL_",
}

// secretWords mark a variable as a credential whatever its family: TORCH_HUB_TOKEN or
// TRITON_API_KEY never pass, nor does anything the caller added (a backend's recipe) by that name.
// The rule is stricter than the plugins' (sdk/secret, which must let a model plugin's settings
// through): a name that merely contains one of these words never reaches a kernel.
var secretWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION"}

// Secret is whether a variable's name marks it as a credential.
func Secret(name string) bool {
	if secret.IsName(name) {
		return true
	}
	up := strings.ToUpper(name)
	for _, w := range secretWords {
		if strings.Contains(up, w) {
			return true
		}
	}
	return false
}

// allowed is whether a variable of the caller's environment may reach a confined program.
func allowed(name string) bool {
	if Secret(name) {
		return false
	}
	if slices.Contains(allowedNames, name) {
		return true
	}
	for _, p := range allowedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Environ is a confined program's environment: the allowlisted variables of environ, then set
// (the caller's own settings: folders, devices, channels), later entries replacing earlier ones
// of the same name. A variable of set whose name marks a credential is dropped too: whatever
// puts it there, a key never reaches a kernel.
func Environ(environ, set []string) []string {
	var out []string
	index := map[string]int{}
	put := func(kv string) {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || Secret(name) {
			return
		}
		if i, seen := index[name]; seen {
			out[i] = kv
			return
		}
		index[name] = len(out)
		out = append(out, kv)
	}
	for _, kv := range environ {
		if name, _, _ := strings.Cut(kv, "="); allowed(name) {
			put(kv)
		}
	}
	for _, kv := range set {
		put(kv)
	}
	return out
}
