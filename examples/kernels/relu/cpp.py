"""ReLU on the CPU: one pass over the input.

On x86-64 the loop uses SSE2 intrinsics (base ISA); max(0, v) with 0 as the first operand returns v
when v is NaN, so NaN propagates like torch.relu. GCC does not vectorize the plain `v < 0 ? 0 : v`
loop under its default -ftrapping-math; that loop remains for the tail and for other ISAs.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cstdint>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "relu_forward: expected a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward: expected float32");
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty(xc.sizes(), xc.options());
    const int64_t n = xc.numel();
    const float* __restrict__ src = xc.data_ptr<float>();
    float* __restrict__ dst = y.data_ptr<float>();
    int64_t i = 0;
#if defined(__SSE2__)
    const __m128 zero = _mm_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        // _mm_max_ps(a, b) returns b unless a > b, so max(0, NaN) is NaN.
        const __m128 v0 = _mm_max_ps(zero, _mm_loadu_ps(src + i));
        const __m128 v1 = _mm_max_ps(zero, _mm_loadu_ps(src + i + 4));
        const __m128 v2 = _mm_max_ps(zero, _mm_loadu_ps(src + i + 8));
        const __m128 v3 = _mm_max_ps(zero, _mm_loadu_ps(src + i + 12));
        _mm_storeu_ps(dst + i, v0);
        _mm_storeu_ps(dst + i + 4, v1);
        _mm_storeu_ps(dst + i + 8, v2);
        _mm_storeu_ps(dst + i + 12, v3);
    }
#endif
    for (; i < n; ++i) {
        const float v = src[i];
        dst[i] = v < 0.0f ? 0.0f : v;  // NaN stays NaN
    }
    return y;
}
"""

_ext = load_inline(
    name="kbp_relu_cpp",
    cpp_sources=_CPP_SOURCE,
    functions=["relu_forward"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.relu_forward(x)
