package contract

import (
	"strings"
	"testing"
)

func TestKernelsOfSource(t *testing.T) {
	src := `
__global__ void relu_kernel(const float* x, float* y, int n) {}
template <typename T>
__global__ void __launch_bounds__(256) scale_kernel(T* x) {}
extern "C" __global__
void plain(int* p) {}
@triton.jit
def _add_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass

@triton.autotune(configs=[triton.Config({"B": 64})], key=["n"])
@triton.jit
def tuned(x_ptr, n, B: tl.constexpr):
    pass
`
	got := kernelsOf(src)
	for _, want := range []string{"relu_kernel", "scale_kernel", "plain", "_add_kernel", "tuned"} {
		if !got.names[want] {
			t.Errorf("%s not found in %v", want, got.names)
		}
	}
	if got.names["__launch_bounds__"] || got.cutlass {
		t.Errorf("got %+v", got)
	}
	if !kernelsOf("#include <cutlass/gemm/device/gemm.h>\n").cutlass || !kernelsOf("using namespace cute;\nauto t = cute::make_tensor(p, l);").cutlass {
		t.Error("a CUTLASS or CuTe source is not recognised")
	}
}

func TestCustomKernel(t *testing.T) {
	cuda := kernelsOf("__global__ void relu_kernel(float* x) {}\n__global__ void vectorized_elementwise_kernel(float* x) {}\n__global__ void ampere_sgemm_128x64_nn() {}")
	triton := kernelsOf("@triton.jit\ndef _matmul_kernel(a):\n    pass\n")
	cutlass := kernelsOf("#include <cutlass/gemm/device/gemm.h>\n__global__ void bias_gelu(float* c) {}\n")
	cases := []struct {
		own  ownKernels
		name string
		want bool
	}{
		{cuda, "relu_kernel(float const*, float*, long)", true},
		{cuda, "void relu_kernel<float>(float const*, float*, long)", true},
		{cuda, "(anonymous namespace)::relu_kernel(float*)", true},
		{cuda, "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, float, at::detail::Array<char*, 2>)", false},
		{cuda, "vectorized_elementwise_kernel(float*)", true},
		{cuda, "ampere_sgemm_128x64_nn", false},
		{cuda, "softmax_kernel(float*)", false},
		{triton, "_matmul_kernel", true},
		{triton, "triton_poi_fused_relu_0", false},
		{cutlass, "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::gemm::threadblock::MmaMultistage<cutlass::gemm::GemmShape<128, 128, 32>, float> > >(cutlass::gemm::kernel::Gemm<float>::Params)", true},
		{cutlass, "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x3_nn_align4>(cutlass_80_tensorop_s1688gemm_128x128_16x3_nn_align4::Params)", false},
		{cutlass, "void cutlass::device_kernel<at::cuda::detail::enable_3x_kernel_for_sm90<cutlass::gemm::kernel::GemmUniversal<float> > >(float)", false},
		{cutlass, "bias_gelu(float*)", true},
		{cutlass, "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", false},
		{cuda, "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<float> >(float)", false}, // no CUTLASS in this source
		// Seen on the H200: an honest CUTLASS kernel with a library-like prefix in the anonymous
		// namespace is the candidate's; the same name flat is ambiguous, and a library's.
		{kernelsOf("#include <cutlass/array.h>\n__global__ void cutlass_relu_kernel(const float* x) {}"), "(anonymous namespace)::cutlass_relu_kernel(float const*, float*, long, bool)", true},
		{kernelsOf("#include <cutlass/array.h>\n__global__ void cutlass_relu_kernel(const float* x) {}"), "cutlass_relu_kernel(float const*)", false},
	}
	for _, c := range cases {
		if got := c.own.custom(c.name); got != c.want {
			t.Errorf("custom(%.60q) = %v, want %v", c.name, got, c.want)
		}
	}
}

// The profiler passes some kernels on mangled (CUTLASS's templated GEMM on torch 2.11): they are
// demangled before they are matched.
func TestMangledKernelNames(t *testing.T) {
	ev := workerEvidence{Rows: []evidenceRow{
		{Name: "_ZN7cutlass6KernelINS_4gemm6kernel4GemmIfEEEEvNT_6ParamsE", Kind: "kernel"},
		{Name: "_ZN12_GLOBAL__N_119cutlass_relu_kernelEPKfPflb", Kind: "kernel"},
		{Name: "not_mangled_kernel", Kind: "kernel"},
	}}
	ev.demangle()
	own := kernelsOf("#include <cutlass/gemm/device/gemm.h>\n__global__ void cutlass_relu_kernel(const float* x, float* y, int64_t n, bool v) {}")
	want := []bool{true, true, false}
	for i, row := range ev.Rows {
		if strings.HasPrefix(row.Name, "_Z") {
			t.Errorf("%q was not demangled", row.Name)
		}
		if got := own.custom(row.Name); got != want[i] {
			t.Errorf("custom(%q) = %v, want %v", row.Name, got, want[i])
		}
	}
}
