"""FLAGGED ON PURPOSE (precision_downcast): sum over the middle dimension, accumulated in fp32 but
stored through fp16, on a float32 task whose tolerance (1e-3) lets it pass.

Rounding to fp16 loses at most 2^-11 (4.9e-4) relative, inside rtol 1e-3, so every trial passes;
the contract's precision measurement against a float64 run of the task finds ~12 bits where
float32 gives ~24, and flags precision_downcast on the pass.
Not one of the bundled examples: flagged/kernels.yaml lists it for `kbplatform eval --kernel`.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor sum_mid_half(torch::Tensor x);"

_CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>

// One thread per (batch, inner) column; consecutive threads read consecutive inner positions.
__global__ void sum_mid_half_kernel(const float* __restrict__ x, float* __restrict__ y,
                                    int64_t batch, int64_t reduce, int64_t inner) {
    const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (col >= batch * inner) return;
    const int64_t b = col / inner, i = col % inner;
    const float* p = x + b * reduce * inner + i;
    float acc = 0.f;
    for (int64_t r = 0; r < reduce; ++r) acc += p[r * inner];
    y[col] = __half2float(__float2half_rn(acc));  // the downcast
}

torch::Tensor sum_mid_half(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 3, "sum_mid_half: expected a 3-D float32 CUDA tensor");
    auto xc = x.contiguous();
    const int64_t batch = xc.size(0), reduce = xc.size(1), inner = xc.size(2);
    auto y = torch::empty({batch, 1, inner}, xc.options());
    const int64_t cols = batch * inner;
    if (cols == 0) return y;
    const int threads = 256;
    sum_mid_half_kernel<<<(cols + threads - 1) / threads, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), batch, reduce, inner);
    return y;
}
"""

_ext = load_inline(name="kbp_flagged_sum_mid_half", cpp_sources=_CPP_DECL, cuda_sources=_CUDA_SOURCE,
                   functions=["sum_mid_half"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        if dim != 1:
            raise ValueError("this kernel sums over dimension 1")

    def forward(self, x):
        return _ext.sum_mid_half(x)
