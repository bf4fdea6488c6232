"""FLAGGED ON PURPOSE (torch_delegation, no_custom_kernel): a CUDA ReLU that builds its own kernel
and never launches it; forward calls torch.relu.

Correct, so it passes; the static rules see torch.relu in forward (torch_delegation) and the
runtime evidence sees only PyTorch's own kernel run during a profiled forward (no_custom_kernel).
Not one of the bundled examples: flagged/kernels.yaml lists it for `kbplatform eval --kernel`.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor relu_forward(torch::Tensor x);"

_CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void flagged_relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : (x[i] != x[i] ? x[i] : 0.f);
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    flagged_relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

_ext = load_inline(name="kbp_flagged_relu_delegates", cpp_sources=_CPP_DECL, cuda_sources=_CUDA_SOURCE,
                   functions=["relu_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = _ext  # built, kept, never called

    def forward(self, x):
        return torch.relu(x)
