"""LayerNorm over the trailing dimension(s) on the GPU: one block per row.

Pass 1 reads the row once; each thread keeps Welford statistics (count, mean, M2), folding in a
float4 at a time with Chan's merge formula, which stays accurate when the mean is large next to
the spread (no E[x^2] - E[x]^2 cancellation). The per-thread statistics are merged with warp
shuffles and then across warps through shared memory. Pass 2 re-reads the row and writes
(x - mean) * rstd * weight + bias.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);"

_CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <algorithm>
#include <climits>
#include <cstdint>

namespace {

constexpr int kMaxThreads = 1024;
constexpr unsigned kFullMask = 0xffffffffu;

struct Stats {
    float n;     // number of elements
    float mean;
    float m2;    // sum of squared deviations from mean
};

__device__ __forceinline__ Stats merge(Stats a, Stats b) {
    const float n = a.n + b.n;
    if (n == 0.0f) return a;
    const float delta = b.mean - a.mean;
    const float wb = b.n / n;
    Stats r;
    r.n = n;
    r.mean = a.mean + delta * wb;
    r.m2 = a.m2 + b.m2 + delta * delta * a.n * wb;
    return r;
}

__device__ __forceinline__ Stats shfl_xor(Stats s, int off) {
    Stats r;
    r.n = __shfl_xor_sync(kFullMask, s.n, off);
    r.mean = __shfl_xor_sync(kFullMask, s.mean, off);
    r.m2 = __shfl_xor_sync(kFullMask, s.m2, off);
    return r;
}

// blockDim.x must be a multiple of 32. Every thread gets the row's statistics.
__device__ __forceinline__ Stats block_merge(Stats s, Stats* sh) {
    for (int off = 16; off > 0; off >>= 1) s = merge(s, shfl_xor(s, off));
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int nwarps = blockDim.x / 32;
    if (lane == 0) sh[warp] = s;
    __syncthreads();
    if (warp == 0) {
        Stats t = {0.0f, 0.0f, 0.0f};
        if (lane < nwarps) t = sh[lane];
        for (int off = 16; off > 0; off >>= 1) t = merge(t, shfl_xor(t, off));
        if (lane == 0) sh[32] = t;
    }
    __syncthreads();
    return sh[32];
}

template <bool kVec>
__global__ void layernorm_rows_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                      const float* __restrict__ b, float* __restrict__ y,
                                      int64_t rows, int64_t d, float eps) {
    __shared__ Stats sh[33];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + row * d;
        float* yr = y + row * d;
        Stats st = {0.0f, 0.0f, 0.0f};
        if (kVec) {
            const float4* xr4 = reinterpret_cast<const float4*>(xr);
            for (int64_t i = threadIdx.x; i < d / 4; i += blockDim.x) {
                const float4 v = xr4[i];
                Stats c;
                c.n = 4.0f;
                c.mean = ((v.x + v.y) + (v.z + v.w)) * 0.25f;
                const float dx = v.x - c.mean, dy = v.y - c.mean, dz = v.z - c.mean, dw = v.w - c.mean;
                c.m2 = (dx * dx + dy * dy) + (dz * dz + dw * dw);
                st = merge(st, c);
            }
        } else {
            for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
                const float v = xr[i];
                st.n += 1.0f;
                const float delta = v - st.mean;
                st.mean += delta / st.n;
                st.m2 += delta * (v - st.mean);
            }
        }
        const Stats tot = block_merge(st, sh);
        const float mean = tot.mean;
        const float var = fmaxf(tot.m2 / static_cast<float>(d), 0.0f);
        const float rstd = 1.0f / sqrtf(var + eps);
        if (kVec) {
            const float4* xr4 = reinterpret_cast<const float4*>(xr);
            const float4* w4 = reinterpret_cast<const float4*>(w);
            const float4* b4 = reinterpret_cast<const float4*>(b);
            float4* yr4 = reinterpret_cast<float4*>(yr);
            for (int64_t i = threadIdx.x; i < d / 4; i += blockDim.x) {
                const float4 v = xr4[i];
                const float4 wv = w4[i];
                const float4 bv = b4[i];
                float4 o;
                o.x = (v.x - mean) * rstd * wv.x + bv.x;
                o.y = (v.y - mean) * rstd * wv.y + bv.y;
                o.z = (v.z - mean) * rstd * wv.z + bv.z;
                o.w = (v.w - mean) * rstd * wv.w + bv.w;
                yr4[i] = o;
            }
        } else {
            for (int64_t i = threadIdx.x; i < d; i += blockDim.x) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
        }
        __syncthreads();  // sh is reused by this block's next row
    }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "layernorm_forward: expected CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                    bias.scalar_type() == torch::kFloat32,
                "layernorm_forward: expected float32 tensors");
    TORCH_CHECK(x.device() == weight.device() && x.device() == bias.device(), "layernorm_forward: device mismatch");
    const c10::cuda::OptionalCUDAGuard guard(x.device());
    torch::Tensor xc = x.contiguous();
    torch::Tensor wc = weight.contiguous();
    torch::Tensor bc = bias.contiguous();
    const int64_t d = wc.numel();
    TORCH_CHECK(bc.numel() == d, "layernorm_forward: weight and bias sizes differ");
    TORCH_CHECK(d > 0 && xc.numel() % d == 0, "layernorm_forward: input does not end in the normalized shape");
    torch::Tensor y = torch::empty(xc.sizes(), xc.options());
    const int64_t rows = xc.numel() / d;
    if (rows == 0) return y;
    const float* xp = xc.data_ptr<float>();
    const float* wp = wc.data_ptr<float>();
    const float* bp = bc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const bool vec = d % 4 == 0 && aligned16(xp) && aligned16(wp) && aligned16(bp) && aligned16(yp);
    const int64_t items = vec ? d / 4 : d;
    const int threads = static_cast<int>(std::min<int64_t>(kMaxThreads, std::max<int64_t>(32, (items + 31) / 32 * 32)));
    const int64_t blocks = std::min<int64_t>(rows, INT_MAX);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float feps = static_cast<float>(eps);
    if (vec) {
        layernorm_rows_kernel<true><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(xp, wp, bp, yp, rows, d, feps);
    } else {
        layernorm_rows_kernel<false><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(xp, wp, bp, yp, rows, d, feps);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(
    name="kbp_layernorm_cuda",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SOURCE,
    functions=["layernorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        # Same parameter names, shapes and creation order as the reference (ln.weight, ln.bias);
        # the nn.LayerNorm's forward is never called.
        self.ln = nn.LayerNorm(normalized_shape=dim)

    def forward(self, x):
        shape = tuple(self.ln.normalized_shape)
        if tuple(x.shape[x.dim() - len(shape):]) != shape:
            raise ValueError(f"input shape {tuple(x.shape)} does not end in {shape}")
        return _ext.layernorm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)
