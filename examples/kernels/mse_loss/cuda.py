"""Mean squared error on the GPU, fused and deterministic.

Stage 1: a fixed grid (a few blocks per SM) walks the inputs with a grid-stride loop of float4
loads; each thread forms (p - t)^2 in float, as the reference does, and accumulates in double.
Each block reduces its threads with warp shuffles and shared memory and writes one double partial.
Stage 2: one block sums the partials in a fixed order and writes sum / n as a 0-dim float tensor.
No atomics, so the result is bitwise reproducible for a given input size and GPU.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor mse_forward(torch::Tensor predictions, torch::Tensor targets);"

_CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <algorithm>
#include <cstdint>

namespace {

constexpr int kThreads = 256;
constexpr int kFinalThreads = 1024;
constexpr unsigned kFullMask = 0xffffffffu;

// Sum of v over the block, returned to thread 0. blockDim.x must be a multiple of 32.
__device__ __forceinline__ double block_sum(double v, double* sh) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int nwarps = blockDim.x / 32;
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    double total = 0.0;
    if (warp == 0) {
        total = lane < nwarps ? sh[lane] : 0.0;
        for (int off = 16; off > 0; off >>= 1) total += __shfl_xor_sync(kFullMask, total, off);
    }
    return total;  // meaningful in thread 0 only
}

template <bool kVec>
__global__ void sq_diff_partial_kernel(const float* __restrict__ p, const float* __restrict__ t, int64_t n,
                                       double* __restrict__ partials) {
    __shared__ double sh[32];
    const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    double acc = 0.0;
    int64_t tail_start = 0;
    if (kVec) {
        const int64_t n4 = n / 4;
        const float4* p4 = reinterpret_cast<const float4*>(p);
        const float4* t4 = reinterpret_cast<const float4*>(t);
        for (int64_t i = tid; i < n4; i += stride) {
            const float4 a = p4[i];
            const float4 b = t4[i];
            const float dx = a.x - b.x, dy = a.y - b.y, dz = a.z - b.z, dw = a.w - b.w;
            acc += static_cast<double>((dx * dx + dy * dy) + (dz * dz + dw * dw));
        }
        tail_start = n4 * 4;
    }
    for (int64_t i = tail_start + tid; i < n; i += stride) {
        const float diff = p[i] - t[i];
        acc += static_cast<double>(diff * diff);
    }
    const double total = block_sum(acc, sh);
    if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void finalize_kernel(const double* __restrict__ partials, int64_t num_partials, int64_t n,
                                float* __restrict__ out) {
    __shared__ double sh[32];
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < num_partials; i += blockDim.x) acc += partials[i];
    const double total = block_sum(acc, sh);
    if (threadIdx.x == 0) out[0] = static_cast<float>(total / static_cast<double>(n));  // n == 0: NaN, as mean()
}

}  // namespace

torch::Tensor mse_forward(torch::Tensor predictions, torch::Tensor targets) {
    TORCH_CHECK(predictions.is_cuda() && targets.is_cuda(), "mse_forward: expected CUDA tensors");
    TORCH_CHECK(predictions.device() == targets.device(), "mse_forward: device mismatch");
    TORCH_CHECK(predictions.scalar_type() == torch::kFloat32 && targets.scalar_type() == torch::kFloat32,
                "mse_forward: expected float32 tensors");
    TORCH_CHECK(predictions.sizes() == targets.sizes(), "mse_forward: predictions and targets differ in shape");
    const c10::cuda::OptionalCUDAGuard guard(predictions.device());
    torch::Tensor pc = predictions.contiguous();
    torch::Tensor tc = targets.contiguous();
    const int64_t n = pc.numel();
    const float* pp = pc.data_ptr<float>();
    const float* tp = tc.data_ptr<float>();
    const bool vec = reinterpret_cast<uintptr_t>(pp) % 16 == 0 && reinterpret_cast<uintptr_t>(tp) % 16 == 0;
    const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t items = vec ? n / 4 : n;
    const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((items + kThreads - 1) / kThreads, sms * 8));
    torch::Tensor partials = torch::empty({blocks}, pc.options().dtype(torch::kFloat64));
    torch::Tensor out = torch::empty({}, pc.options());
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    if (vec) {
        sq_diff_partial_kernel<true><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
            pp, tp, n, partials.data_ptr<double>());
    } else {
        sq_diff_partial_kernel<false><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
            pp, tp, n, partials.data_ptr<double>());
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    finalize_kernel<<<1, kFinalThreads, 0, stream>>>(partials.data_ptr<double>(), blocks, n, out.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    name="kbp_mse_loss_cuda",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SOURCE,
    functions=["mse_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return _ext.mse_forward(predictions, targets)
