package contract

import (
	"regexp"
	"slices"
	"strings"
)

// Which device kernels are the candidate's own. The profiler names every kernel that ran; the
// driver holds the candidate's source, so it decides here, on the trusted side, which names the
// source defines. A kernel counts as the candidate's when its name (the last component of the
// demangled name, without template arguments or parameters) is one the source defines as a CUDA
// __global__ function or a Triton jit function, and it does not sit in a library's namespace; or,
// for a source that uses CUTLASS or CuTe, when it is a kernel templated on CUTLASS's own GEMM,
// convolution, reduction or epilogue types. cuBLAS ships CUTLASS-derived kernels too, but under
// flat names (cutlass::Kernel2<cutlass_80_tensorop_...>, sm90_xmma_..., nvjet_...) that never
// carry those namespaces.

var (
	globalRe    = regexp.MustCompile(`__global__`)
	callNameRe  = regexp.MustCompile(`([A-Za-z_]\w*)\s*\(`)
	tritonDefRe = regexp.MustCompile(`@(?:triton\.)?(?:jit|autotune|heuristics)\b[\s\S]*?\bdef\s+([A-Za-z_]\w*)\s*\(`)
	cutlassRe   = regexp.MustCompile(`#include\s*[<"](?:cutlass|cute)/|\bcutlass::|\bcute::`)
	cutlassOwn  = []string{"cutlass::gemm::", "cutlass::conv::", "cutlass::reduction::", "cutlass::epilogue::", "cute::"}
	// Namespaces of PyTorch's and the CUDA libraries' kernels (the qualifier's first component),
	// and the names of library kernels without one (cuBLAS, cuDNN, torch.compile's Triton
	// kernels): never the candidate's, whatever it names its own kernels.
	libraryNS     = []string{"at", "c10", "cub", "thrust", "cudnn", "cublas", "cublasLt", "flash", "std", "cutlass"}
	libraryPrefix = []string{"ampere_", "volta_", "turing_", "hopper_", "sm50_", "sm70_", "sm75_", "sm80_", "sm86_", "sm89_", "sm90_", "sm100_",
		"nvjet", "cutlass_", "cutlass3x_", "xmma", "gemv", "gemmk1", "cudnn", "cublas",
		"triton_poi_", "triton_red_", "triton_per_", "triton_tem_", "triton_for_"}
)

// ownKernels is what a candidate's source defines: the names of its kernels, and whether it uses
// CUTLASS or CuTe.
type ownKernels struct {
	names   map[string]bool
	cutlass bool
}

func kernelsOf(source string) ownKernels {
	own := ownKernels{names: map[string]bool{}, cutlass: cutlassRe.MatchString(source)}
	for _, loc := range globalRe.FindAllStringIndex(source, -1) {
		// The declared name is the first identifier followed by '(' after __global__, past
		// __launch_bounds__(...) and the return type.
		tail := source[loc[1]:min(len(source), loc[1]+400)]
		for _, m := range callNameRe.FindAllStringSubmatch(tail, -1) {
			if m[1] != "__launch_bounds__" && m[1] != "__maxnreg__" {
				own.names[m[1]] = true
				break
			}
		}
	}
	for _, m := range tritonDefRe.FindAllStringSubmatch(source, -1) {
		own.names[m[1]] = true
	}
	return own
}

// splitKernelName returns the qualifier and the base name of a demangled kernel name:
// "void ns::relu_kernel<float>(float const*, int)" gives ("ns", "relu_kernel").
func splitKernelName(name string) (qual, base string) {
	s := strings.TrimSpace(name)
	s = strings.ReplaceAll(s, "(anonymous namespace)", "anonymous")
	s = strings.TrimPrefix(s, "void ")
	end := len(s)
	for i, c := range s {
		if c == '<' || c == '(' || c == ' ' {
			end = i
			break
		}
	}
	s = s[:end]
	if i := strings.LastIndex(s, "::"); i >= 0 {
		return s[:i], s[i+2:]
	}
	return "", s
}

// custom reports whether a device kernel of this name was built from the candidate's source.
func (o ownKernels) custom(name string) bool {
	qual, base := splitKernelName(name)
	root, _, _ := strings.Cut(qual, "::")
	// PyTorch's own CUTLASS kernels (attention, scaled and grouped GEMMs) carry its types.
	if o.cutlass && (root == "cutlass" || root == "cute") && !strings.Contains(name, "at::") && !strings.Contains(name, "pytorch") {
		for _, ns := range cutlassOwn {
			if strings.Contains(name, ns) {
				return true
			}
		}
	}
	if !o.names[base] || slices.Contains(libraryNS, root) {
		return false
	}
	if qual != "" {
		// In a namespace of the candidate's own (its anonymous one, typically): library kernels
		// with flat names never are, so a name the source defines is the source's, whatever its
		// prefix (a CUTLASS kernel may well be called cutlass_relu_kernel).
		return true
	}
	for _, p := range libraryPrefix {
		if strings.HasPrefix(base, p) {
			return false
		}
	}
	return true
}
