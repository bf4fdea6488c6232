"""Linear + bias + GELU(tanh) + scale: a CUTLASS device GEMM whose epilogue adds the bias, then one
elementwise pass for GELU and the scale.

y = x @ W^T + b is one cutlass::gemm::device::Gemm (fp32 SIMT, exact FMA, no TF32): x is row-major
(M, K); nn.Linear's weight (N, K) row-major is W^T as a column-major (K, N) operand, so no
transpose is made; the epilogue's source operand C is the bias with a leading dimension of 0 (every
row reads the same N values) and beta = 1, so the bias add costs nothing extra. GELU with the tanh
approximation and the scale then run in one in-place pass over y with tanhf: CUTLASS's own
GELU_taylor epilogue uses tanh.approx, whose ~2^-11 relative error is below float32's precision.
Needs the cutlass backend's cutlass_path.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor cutlass_linear_bias_gelu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double scale);"

_CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cstdint>

#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm.h>
#include <cutlass/epilogue/thread/linear_combination.h>
#include <cutlass/gemm/threadblock/threadblock_swizzle.h>

namespace {

using RowMajor = cutlass::layout::RowMajor;
using ColumnMajor = cutlass::layout::ColumnMajor;

// D = 1 * (x @ W^T) + 1 * C, C the bias broadcast over rows.
using Gemm = cutlass::gemm::device::Gemm<
    float, RowMajor,                                   // A: x (M, K)
    float, ColumnMajor,                                // B: W^T (K, N), i.e. W (N, K) row-major
    float, RowMajor,                                   // C (bias, ldc 0) and D (M, N)
    float,
    cutlass::arch::OpClassSimt,
    cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 8>,
    cutlass::gemm::GemmShape<32, 64, 8>,
    cutlass::gemm::GemmShape<1, 1, 1>,
    cutlass::epilogue::thread::LinearCombination<float, 1, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>,
    3>;  // pipeline stages (as CUTLASS's own SM80 SIMT tests)

constexpr int kThreads = 256;

__device__ __forceinline__ float gelu_tanh_scale(float v, float scale) {
    const float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
    const float kKappa = 0.044715f;
    return 0.5f * v * (1.0f + tanhf(kBeta * (v + kKappa * v * v * v))) * scale;
}

// y holds n floats; kVec: n % 4 == 0 and y 16-byte aligned.
template <bool kVec>
__global__ void gelu_tanh_scale_kernel(float* __restrict__ y, int64_t n, float scale) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    const int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (kVec) {
        float4* y4 = reinterpret_cast<float4*>(y);
        for (int64_t i = start; i < n / 4; i += stride) {
            float4 v = y4[i];
            v.x = gelu_tanh_scale(v.x, scale);
            v.y = gelu_tanh_scale(v.y, scale);
            v.z = gelu_tanh_scale(v.z, scale);
            v.w = gelu_tanh_scale(v.w, scale);
            y4[i] = v;
        }
    } else {
        for (int64_t i = start; i < n; i += stride) y[i] = gelu_tanh_scale(y[i], scale);
    }
}

}  // namespace

torch::Tensor cutlass_linear_bias_gelu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double scale) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "cutlass_linear_bias_gelu: expected CUDA tensors");
    TORCH_CHECK(x.device() == weight.device() && x.device() == bias.device(), "cutlass_linear_bias_gelu: device mismatch");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                    bias.scalar_type() == torch::kFloat32,
                "cutlass_linear_bias_gelu: expected float32 tensors");
    TORCH_CHECK(weight.dim() == 2 && bias.dim() == 1 && bias.size(0) == weight.size(0),
                "cutlass_linear_bias_gelu: bad weight/bias shapes");
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "cutlass_linear_bias_gelu: in_features mismatch");
    const c10::cuda::CUDAGuard guard(x.device());
    const int k = static_cast<int>(weight.size(1));
    const int n = static_cast<int>(weight.size(0));
    torch::Tensor x2 = x.reshape({-1, k}).contiguous();
    torch::Tensor w = weight.contiguous();
    torch::Tensor b = bias.contiguous();
    const int m = static_cast<int>(x2.size(0));
    std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end());
    out_shape.back() = n;
    torch::Tensor y = torch::empty({m, n}, x.options());
    if (m == 0 || n == 0) return y.reshape(out_shape);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();

    Gemm::Arguments args({m, n, k},
                         {x2.data_ptr<float>(), k},  // A row-major, leading dimension K
                         {w.data_ptr<float>(), k},   // B column-major (K, N), leading dimension K
                         {b.data_ptr<float>(), 0},   // C: the bias, the same row for every row
                         {y.data_ptr<float>(), n},   // D
                         {1.0f, 1.0f});
    Gemm gemm;
    cutlass::Status status = gemm.can_implement(args);
    TORCH_CHECK(status == cutlass::Status::kSuccess, "cutlass_linear_bias_gelu: cannot implement: ",
                cutlassGetStatusString(status));
    status = gemm(args, nullptr, stream);
    TORCH_CHECK(status == cutlass::Status::kSuccess, "cutlass_linear_bias_gelu: ", cutlassGetStatusString(status));
    C10_CUDA_KERNEL_LAUNCH_CHECK();

    float* yp = y.data_ptr<float>();
    const int64_t total = static_cast<int64_t>(m) * n;
    const bool vec = total % 4 == 0 && reinterpret_cast<uintptr_t>(yp) % 16 == 0;
    const int64_t items = vec ? total / 4 : total;
    const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((items + kThreads - 1) / kThreads, sms * 8));
    if (vec) {
        gelu_tanh_scale_kernel<true><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(yp, total, static_cast<float>(scale));
    } else {
        gelu_tanh_scale_kernel<false><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(yp, total, static_cast<float>(scale));
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y.reshape(out_shape);
}
"""

_ext = load_inline(
    name="kbp_linear_bias_gelu_cutlass",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SOURCE,
    functions=["cutlass_linear_bias_gelu"],
    # PyTorch builds extensions with its half-precision operators switched off; CUTLASS's numeric
    # headers (included by every GEMM) expect CUDA's own.
    extra_cuda_cflags=["-O3", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
                       "-U__CUDA_NO_HALF2_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        # Same parameter names, shapes and creation order as the reference (linear.weight,
        # linear.bias); the nn.Linear's forward is never called.
        self.linear = nn.Linear(in_features, out_features)
        self.scale = float(scale)

    def forward(self, x):
        return _ext.cutlass_linear_bias_gelu(x, self.linear.weight, self.linear.bias, self.scale)
