"""LayerNorm over the trailing dimension(s) on the CPU, with affine weight and bias.

Two passes over each row for the statistics (mean, then the centred sum of squares, which stays
accurate when the mean is large next to the spread), then one pass for
y = (x - mean) * rstd * weight + bias. Sums run in 16 float lanes folded into a double every
4096 elements. The row function is one template compiled twice: for the base ISA and, chosen at
run time on x86-64, for AVX2+FMA via __attribute__((target)).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdint>

#if defined(__GNUC__)
#define KBP_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define KBP_ALWAYS_INLINE inline
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#define KBP_HAVE_AVX2_PATH 1
#endif

namespace {

constexpr int kLanes = 16;
constexpr int64_t kFold = 4096;  // elements summed in float lanes before folding into a double

KBP_ALWAYS_INLINE double sum_row(const float* __restrict__ x, int64_t d) {
    const int64_t vec_end = d / kLanes * kLanes;
    double total = 0.0;
    for (int64_t start = 0; start < vec_end; start += kFold) {
        const int64_t stop = start + kFold < vec_end ? start + kFold : vec_end;
        float acc[kLanes] = {0.0f};
        for (int64_t i = start; i < stop; i += kLanes)
            for (int j = 0; j < kLanes; ++j) acc[j] += x[i + j];
        for (int j = 0; j < kLanes; ++j) total += acc[j];
    }
    for (int64_t i = vec_end; i < d; ++i) total += x[i];
    return total;
}

KBP_ALWAYS_INLINE double centred_sq_sum_row(const float* __restrict__ x, int64_t d, float mean) {
    const int64_t vec_end = d / kLanes * kLanes;
    double total = 0.0;
    for (int64_t start = 0; start < vec_end; start += kFold) {
        const int64_t stop = start + kFold < vec_end ? start + kFold : vec_end;
        float acc[kLanes] = {0.0f};
        for (int64_t i = start; i < stop; i += kLanes)
            for (int j = 0; j < kLanes; ++j) {
                const float t = x[i + j] - mean;
                acc[j] += t * t;
            }
        for (int j = 0; j < kLanes; ++j) total += acc[j];
    }
    for (int64_t i = vec_end; i < d; ++i) {
        const float t = x[i] - mean;
        total += t * t;
    }
    return total;
}

KBP_ALWAYS_INLINE void layernorm_row_impl(const float* __restrict__ x, const float* __restrict__ w,
                                          const float* __restrict__ b, float* __restrict__ y,
                                          int64_t d, float eps) {
    const float mean = static_cast<float>(sum_row(x, d) / static_cast<double>(d));
    const double var = centred_sq_sum_row(x, d, mean) / static_cast<double>(d);
    const float rstd = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
    for (int64_t i = 0; i < d; ++i) y[i] = (x[i] - mean) * rstd * w[i] + b[i];
}

void layernorm_row_base(const float* x, const float* w, const float* b, float* y, int64_t d, float eps) {
    layernorm_row_impl(x, w, b, y, d, eps);
}

#if defined(KBP_HAVE_AVX2_PATH)
__attribute__((target("avx2,fma"))) void layernorm_row_avx2(const float* x, const float* w,
                                                           const float* b, float* y, int64_t d,
                                                           float eps) {
    layernorm_row_impl(x, w, b, y, d, eps);
}
#endif

typedef void (*RowFn)(const float*, const float*, const float*, float*, int64_t, float);

RowFn pick_row_fn() {
#if defined(KBP_HAVE_AVX2_PATH)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return layernorm_row_avx2;
#endif
    return layernorm_row_base;
}

}  // namespace

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.device().is_cpu() && weight.device().is_cpu() && bias.device().is_cpu(),
                "layernorm_forward: expected CPU tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                    bias.scalar_type() == torch::kFloat32,
                "layernorm_forward: expected float32 tensors");
    torch::Tensor xc = x.contiguous();
    torch::Tensor wc = weight.contiguous();
    torch::Tensor bc = bias.contiguous();
    const int64_t d = wc.numel();
    TORCH_CHECK(bc.numel() == d, "layernorm_forward: weight and bias sizes differ");
    TORCH_CHECK(d > 0 && xc.numel() % d == 0, "layernorm_forward: input does not end in the normalized shape");
    torch::Tensor y = torch::empty(xc.sizes(), xc.options());
    const int64_t rows = xc.numel() / d;
    const float* src = xc.data_ptr<float>();
    const float* w = wc.data_ptr<float>();
    const float* b = bc.data_ptr<float>();
    float* dst = y.data_ptr<float>();
    static const RowFn row_fn = pick_row_fn();
    const float feps = static_cast<float>(eps);
    for (int64_t r = 0; r < rows; ++r) row_fn(src + r * d, w, b, dst + r * d, d, feps);
    return y;
}
"""

_ext = load_inline(
    name="kbp_layernorm_cpp",
    cpp_sources=_CPP_SOURCE,
    functions=["layernorm_forward"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        # Holds the parameters under the same names, shapes and creation order as the reference
        # (ln.weight, ln.bias); its forward is never called.
        self.ln = nn.LayerNorm(normalized_shape=dim)

    def forward(self, x):
        shape = tuple(self.ln.normalized_shape)
        if tuple(x.shape[x.dim() - len(shape):]) != shape:
            raise ValueError(f"input shape {tuple(x.shape)} does not end in {shape}")
        return _ext.layernorm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)
