"""ReLU written with CUTLASS's own array and functor types: one pass over the input.

Each thread moves 16 bytes at a time as a cutlass::AlignedArray<float, 4> (one 128-bit load and
store) and applies CUTLASS's epilogue functor ReLu<Array<float, 4>>, whose maximum propagates NaN
as torch.relu does (max.NaN.f32 on SM80 and later). A scalar loop takes the tail and misaligned
tensors. Needs the cutlass backend's cutlass_path.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor cutlass_relu(torch::Tensor x);"

_CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cstdint>

#include <cutlass/cutlass.h>
#include <cutlass/array.h>
#include <cutlass/functional.h>
#include <cutlass/epilogue/thread/activation.h>

namespace {

constexpr int kVec = 4;
constexpr int kThreads = 256;
using Frag = cutlass::Array<float, kVec>;
using Access = cutlass::AlignedArray<float, kVec>;  // 16-byte aligned: one vector load or store

// vec: x and y 16-byte aligned; the first n4 * 4 elements go as vectors, the rest one by one.
__global__ void cutlass_relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, bool vec) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    const int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t n4 = vec ? n / kVec : 0;
    const Access* xv = reinterpret_cast<const Access*>(x);
    Access* yv = reinterpret_cast<Access*>(y);
    cutlass::epilogue::thread::ReLu<Frag> relu;
    for (int64_t i = start; i < n4; i += stride) {
        const Access in = xv[i];
        const Frag out = relu(static_cast<const Frag&>(in));
        Access store;
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < kVec; ++j) store[j] = out[j];
        yv[i] = store;
    }
    cutlass::epilogue::thread::ReLu<float> relu1;
    for (int64_t i = n4 * kVec + start; i < n; i += stride) y[i] = relu1(x[i]);
}

}  // namespace

torch::Tensor cutlass_relu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "cutlass_relu: expected a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "cutlass_relu: expected float32");
    const c10::cuda::CUDAGuard guard(x.device());
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const float* xp = xc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const bool vec = reinterpret_cast<uintptr_t>(xp) % 16 == 0 && reinterpret_cast<uintptr_t>(yp) % 16 == 0;
    const int64_t items = vec ? (n + kVec - 1) / kVec : n;
    const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((items + kThreads - 1) / kThreads, sms * 16));
    cutlass_relu_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(xp, yp, n, vec);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(
    name="kbp_relu_cutlass",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SOURCE,
    functions=["cutlass_relu"],
    # PyTorch builds extensions with its half-precision operators switched off; CUTLASS's numeric
    # headers expect CUDA's own.
    extra_cuda_cflags=["-O3", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
                       "-U__CUDA_NO_HALF2_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.cutlass_relu(x)
