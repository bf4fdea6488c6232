# Computes in float32 but rounds every result through fp16 (c10::Half): within a 1e-3 tolerance
# (fp16's relative rounding error is at most 2^-11), and its own C++ kernel runs, so the runtime
# evidence must flag precision_downcast and nothing else.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_src = r"""
#include <torch/extension.h>

torch::Tensor scale_relu_half(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    x = x.contiguous();
    auto out = torch::empty_like(x);
    const int64_t cols = x.size(-1);
    const int64_t n = x.numel();
    const float* xp = x.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* op = out.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
        const float v = xp[i] * wp[i % cols] + bp[i % cols];
        op[i] = static_cast<float>(c10::Half(v > 0.f ? v : 0.f));
    }
    return out;
}
"""

_mod = load_inline(name="kbp_test_half_round", cpp_sources=_src, functions=["scale_relu_half"], extra_cflags=["-O1"])


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim))
        self.b = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return _mod.scale_relu_half(x, self.w, self.b)
