"""Softmax over the last dimension on the CPU.

Per row: a max pass, a pass that writes exp(x - max) and sums it, and a pass scaling by 1/sum.
exp is our own branch-free polynomial (Cody-Waite range reduction, degree-7 Taylor on
|r| <= ln2/2, a few ulp; results below exp(-87) are flushed to 0).

Code paths, picked once at run time: AVX2+FMA (compiled through __attribute__((target)), so no -m
flags are needed), SSE2 (part of the x86-64 base ISA), and plain scalar code elsewhere. The plain
loops are not auto-vectorized by GCC under its default -ftrapping-math, hence the intrinsics.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cstdint>
#include <cstring>
#include <limits>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#define KBP_HAVE_AVX2_PATH 1
#include <immintrin.h>
#endif

namespace {

// exp(x) = 2^k * exp(r), k = round(x / ln2), r = x - k ln2.
const float kExpLo = -87.0f;               // below: flushed to 0 (true value < 1.7e-38)
const float kExpHi = 88.0f;
const float kLog2e = 1.44269504088896341f;
const float kRoundMagic = 12582912.0f;     // 1.5 * 2^23: (t + M) - M rounds t to an integer
const float kLn2Hi = 0.693359375f;         // ln2 = kLn2Hi + kLn2Lo; k * kLn2Hi is exact
const float kLn2Lo = -2.12194440e-4f;

inline float exp_scalar(float x) {
    const bool underflow = x < kExpLo;
    float xc = x < kExpLo ? kExpLo : x;
    xc = xc > kExpHi ? kExpHi : xc;
    const float kf = (xc * kLog2e + kRoundMagic) - kRoundMagic;  // in [-126, 127]
    float r = xc - kf * kLn2Hi;
    r = r - kf * kLn2Lo;                                         // |r| <= ~0.347
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t bits = (static_cast<int32_t>(kf) + 127) << 23;  // exponent field in [1, 254]
    float two_k;
    std::memcpy(&two_k, &bits, sizeof(two_k));
    return underflow ? 0.0f : p * two_k;
}

void softmax_row_scalar(const float* __restrict__ x, float* __restrict__ y, int64_t d) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < d; ++i) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (int64_t i = 0; i < d; ++i) {
        const float e = exp_scalar(x[i] - mx);
        y[i] = e;
        sum += e;
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < d; ++i) y[i] *= inv;
}

#if defined(__SSE2__)
inline __m128 exp_sse2(__m128 x) {
    const __m128 lo = _mm_set1_ps(kExpLo);
    const __m128 underflow = _mm_cmplt_ps(x, lo);
    const __m128 xc = _mm_min_ps(_mm_max_ps(x, lo), _mm_set1_ps(kExpHi));
    const __m128 magic = _mm_set1_ps(kRoundMagic);
    const __m128 kf = _mm_sub_ps(_mm_add_ps(_mm_mul_ps(xc, _mm_set1_ps(kLog2e)), magic), magic);
    __m128 r = _mm_sub_ps(xc, _mm_mul_ps(kf, _mm_set1_ps(kLn2Hi)));
    r = _mm_sub_ps(r, _mm_mul_ps(kf, _mm_set1_ps(kLn2Lo)));
    __m128 p = _mm_set1_ps(1.0f / 5040.0f);
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f / 720.0f));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f / 120.0f));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f / 24.0f));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f / 6.0f));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(0.5f));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f));
    const __m128i bits = _mm_slli_epi32(_mm_add_epi32(_mm_cvttps_epi32(kf), _mm_set1_epi32(127)), 23);
    return _mm_andnot_ps(underflow, _mm_mul_ps(p, _mm_castsi128_ps(bits)));
}

void softmax_row_sse2(const float* __restrict__ x, float* __restrict__ y, int64_t d) {
    float mx = -std::numeric_limits<float>::infinity();
    int64_t i = 0;
    __m128 m0 = _mm_set1_ps(mx), m1 = m0, m2 = m0, m3 = m0;
    for (; i + 16 <= d; i += 16) {
        m0 = _mm_max_ps(m0, _mm_loadu_ps(x + i));
        m1 = _mm_max_ps(m1, _mm_loadu_ps(x + i + 4));
        m2 = _mm_max_ps(m2, _mm_loadu_ps(x + i + 8));
        m3 = _mm_max_ps(m3, _mm_loadu_ps(x + i + 12));
    }
    for (; i + 4 <= d; i += 4) m0 = _mm_max_ps(m0, _mm_loadu_ps(x + i));
    float lanes[4];
    _mm_storeu_ps(lanes, _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3)));
    for (int j = 0; j < 4; ++j) mx = lanes[j] > mx ? lanes[j] : mx;
    for (; i < d; ++i) mx = x[i] > mx ? x[i] : mx;

    const __m128 vmx = _mm_set1_ps(mx);
    __m128 s0 = _mm_setzero_ps(), s1 = s0;
    i = 0;
    for (; i + 8 <= d; i += 8) {
        const __m128 e0 = exp_sse2(_mm_sub_ps(_mm_loadu_ps(x + i), vmx));
        const __m128 e1 = exp_sse2(_mm_sub_ps(_mm_loadu_ps(x + i + 4), vmx));
        _mm_storeu_ps(y + i, e0);
        _mm_storeu_ps(y + i + 4, e1);
        s0 = _mm_add_ps(s0, e0);
        s1 = _mm_add_ps(s1, e1);
    }
    _mm_storeu_ps(lanes, _mm_add_ps(s0, s1));
    double sum = (static_cast<double>(lanes[0]) + lanes[1]) + (static_cast<double>(lanes[2]) + lanes[3]);
    for (; i < d; ++i) {
        const float e = exp_scalar(x[i] - mx);
        y[i] = e;
        sum += e;
    }

    const float inv = static_cast<float>(1.0 / sum);
    const __m128 vinv = _mm_set1_ps(inv);
    i = 0;
    for (; i + 4 <= d; i += 4) _mm_storeu_ps(y + i, _mm_mul_ps(_mm_loadu_ps(y + i), vinv));
    for (; i < d; ++i) y[i] *= inv;
}
#endif  // __SSE2__

#if defined(KBP_HAVE_AVX2_PATH)
__attribute__((target("avx2,fma"))) inline __m256 exp_avx2(__m256 x) {
    const __m256 lo = _mm256_set1_ps(kExpLo);
    const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(kExpHi));
    const __m256 magic = _mm256_set1_ps(kRoundMagic);
    const __m256 kf = _mm256_sub_ps(_mm256_fmadd_ps(xc, _mm256_set1_ps(kLog2e), magic), magic);
    __m256 r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(kLn2Hi), xc);
    r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(kLn2Lo), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i bits =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(kf), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
}

__attribute__((target("avx2,fma"))) void softmax_row_avx2(const float* __restrict__ x,
                                                         float* __restrict__ y, int64_t d) {
    float mx = -std::numeric_limits<float>::infinity();
    int64_t i = 0;
    __m256 m0 = _mm256_set1_ps(mx), m1 = m0, m2 = m0, m3 = m0;
    for (; i + 32 <= d; i += 32) {
        m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
        m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
        m2 = _mm256_max_ps(m2, _mm256_loadu_ps(x + i + 16));
        m3 = _mm256_max_ps(m3, _mm256_loadu_ps(x + i + 24));
    }
    for (; i + 8 <= d; i += 8) m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    float lanes[8];
    _mm256_storeu_ps(lanes, _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
    for (int j = 0; j < 8; ++j) mx = lanes[j] > mx ? lanes[j] : mx;
    for (; i < d; ++i) mx = x[i] > mx ? x[i] : mx;

    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    i = 0;
    for (; i + 16 <= d; i += 16) {
        const __m256 e0 = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmx));
        const __m256 e1 = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vmx));
        _mm256_storeu_ps(y + i, e0);
        _mm256_storeu_ps(y + i + 8, e1);
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
    }
    _mm256_storeu_ps(lanes, _mm256_add_ps(s0, s1));
    double sum = 0.0;
    for (int j = 0; j < 8; ++j) sum += lanes[j];
    for (; i < d; ++i) {
        const float e = exp_scalar(x[i] - mx);
        y[i] = e;
        sum += e;
    }

    const float inv = static_cast<float>(1.0 / sum);
    const __m256 vinv = _mm256_set1_ps(inv);
    i = 0;
    for (; i + 8 <= d; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), vinv));
    for (; i < d; ++i) y[i] *= inv;
}

bool cpu_has_avx2_fma() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif  // KBP_HAVE_AVX2_PATH

typedef void (*RowFn)(const float*, float*, int64_t);

RowFn pick_row_fn() {
#if defined(KBP_HAVE_AVX2_PATH)
    if (cpu_has_avx2_fma()) return softmax_row_avx2;
#endif
#if defined(__SSE2__)
    return softmax_row_sse2;
#else
    return softmax_row_scalar;
#endif
}

}  // namespace

torch::Tensor softmax_lastdim_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "softmax_lastdim_forward: expected a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "softmax_lastdim_forward: expected float32");
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty(xc.sizes(), xc.options());
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const int64_t d = xc.dim() == 0 ? 1 : xc.size(-1);
    const int64_t rows = n / d;
    const float* src = xc.data_ptr<float>();
    float* dst = y.data_ptr<float>();
    static const RowFn row_fn = pick_row_fn();
    for (int64_t r = 0; r < rows; ++r) row_fn(src + r * d, dst + r * d, d);
    return y;
}

// Runs one row through every compiled path, for tests: 0 scalar, 1 SSE2, 2 AVX2 (if available).
torch::Tensor softmax_lastdim_path(torch::Tensor x, int64_t path) {
    torch::Tensor xc = x.contiguous();
    TORCH_CHECK(xc.scalar_type() == torch::kFloat32 && xc.device().is_cpu() && xc.dim() == 2);
    torch::Tensor y = torch::empty(xc.sizes(), xc.options());
    RowFn fn = softmax_row_scalar;
#if defined(__SSE2__)
    if (path == 1) fn = softmax_row_sse2;
#endif
#if defined(KBP_HAVE_AVX2_PATH)
    if (path == 2 && cpu_has_avx2_fma()) fn = softmax_row_avx2;
#endif
    const int64_t d = xc.size(1);
    for (int64_t r = 0; r < xc.size(0); ++r) fn(xc.data_ptr<float>() + r * d, y.data_ptr<float>() + r * d, d);
    return y;
}
"""

_ext = load_inline(
    name="kbp_softmax_cpp",
    cpp_sources=_CPP_SOURCE,
    functions=["softmax_lastdim_forward", "softmax_lastdim_path"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.softmax_lastdim_forward(x)
