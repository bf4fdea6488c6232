import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_decl = "torch::Tensor scale_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b);"
_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void scale_relu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                  const float* __restrict__ b, float* __restrict__ out,
                                  int64_t n, int64_t cols) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = i % cols;
        const float v = x[i] * w[c] + b[c];
        BODY
    }
}

torch::Tensor scale_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    x = x.contiguous();
    auto out = torch::empty_like(x);
    const int64_t n = x.numel(), cols = x.size(-1);
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 132 * 32);
    scale_relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_mod = load_inline(name="kbp_test_gpu_side_stream", cpp_sources=_decl, cuda_sources=_src.replace("BODY", 'out[i] = v > 0.f ? v : 0.f;'),
                   functions=["scale_relu"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    """Launches its kernel on a side stream and returns without making the caller's stream wait
    for it: in a model the next operation on the caller's stream reads the output unfinished
    (stream_unordered). Events on the default stream alone would also time almost nothing."""

    def __init__(self, dim):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim))
        self.b = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        s = self.__dict__.setdefault('_stream', torch.cuda.Stream())
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            out = _mod.scale_relu(x, self.w, self.b)
        return out
