"""Linear + bias + GELU(tanh) + scale on the GPU.

The GEMM y = x @ W^T goes to cuBLAS through at::matmul (fp32; it honours the caller's TF32
setting, like the reference). Bias, GELU with the tanh approximation and the scale are then fused
into one elementwise pass over y (our own buffer, updated in place): one read and one write of the
output instead of the reference's separate bias, GELU and multiply passes.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = (
    "torch::Tensor linear_bias_gelu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double scale);"
)

_CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <algorithm>
#include <cstdint>

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float bias_gelu_scale(float v, float b, float scale) {
    const float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
    const float kKappa = 0.044715f;
    v += b;
    const float inner = kBeta * (v + kKappa * v * v * v);
    return 0.5f * v * (1.0f + tanhf(inner)) * scale;
}

// y is (rows, cols) contiguous; kVec: cols % 4 == 0 and y, bias 16-byte aligned.
template <bool kVec>
__global__ void bias_gelu_scale_kernel(float* __restrict__ y, const float* __restrict__ bias, int64_t rows,
                                       int64_t cols, float scale) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    const int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (kVec) {
        const int64_t n4 = rows * cols / 4;
        float4* y4 = reinterpret_cast<float4*>(y);
        for (int64_t i = start; i < n4; i += stride) {
            const int64_t col = (i * 4) % cols;  // multiple of 4, col + 3 < cols
            const float4 b = *reinterpret_cast<const float4*>(bias + col);
            float4 v = y4[i];
            v.x = bias_gelu_scale(v.x, b.x, scale);
            v.y = bias_gelu_scale(v.y, b.y, scale);
            v.z = bias_gelu_scale(v.z, b.z, scale);
            v.w = bias_gelu_scale(v.w, b.w, scale);
            y4[i] = v;
        }
    } else {
        const int64_t n = rows * cols;
        for (int64_t i = start; i < n; i += stride) y[i] = bias_gelu_scale(y[i], bias[i % cols], scale);
    }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

torch::Tensor linear_bias_gelu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double scale) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "linear_bias_gelu_forward: expected CUDA tensors");
    TORCH_CHECK(x.device() == weight.device() && x.device() == bias.device(), "linear_bias_gelu_forward: device mismatch");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                    bias.scalar_type() == torch::kFloat32,
                "linear_bias_gelu_forward: expected float32 tensors");
    TORCH_CHECK(weight.dim() == 2 && bias.dim() == 1 && bias.size(0) == weight.size(0),
                "linear_bias_gelu_forward: bad weight/bias shapes");
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "linear_bias_gelu_forward: in_features mismatch");
    const c10::cuda::OptionalCUDAGuard guard(x.device());
    torch::Tensor bc = bias.contiguous();
    // cuBLAS GEMM; a fresh contiguous (..., out_features) tensor that we then own.
    torch::Tensor y = at::matmul(x, weight.t()).contiguous();
    const int64_t cols = weight.size(0);
    const int64_t rows = cols > 0 ? y.numel() / cols : 0;
    if (rows == 0 || cols == 0) return y;
    float* yp = y.data_ptr<float>();
    const float* bp = bc.data_ptr<float>();
    const bool vec = cols % 4 == 0 && aligned16(yp) && aligned16(bp);
    const int64_t items = vec ? rows * cols / 4 : rows * cols;
    const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((items + kThreads - 1) / kThreads, sms * 8));
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    if (vec) {
        bias_gelu_scale_kernel<true><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
            yp, bp, rows, cols, static_cast<float>(scale));
    } else {
        bias_gelu_scale_kernel<false><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
            yp, bp, rows, cols, static_cast<float>(scale));
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(
    name="kbp_linear_bias_gelu_cuda",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SOURCE,
    functions=["linear_bias_gelu_forward"],
    extra_cuda_cflags=["-O3"],
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
        return _ext.linear_bias_gelu_forward(x, self.linear.weight, self.linear.bias, self.scale)
