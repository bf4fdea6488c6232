import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_src = r"""
#include <torch/extension.h>

torch::Tensor scale_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    x = x.contiguous();
    // The last column gets -1, a value no ReLU returns: wrong in every row whatever the draw
    // (left at zero, it was right wherever the reference's last column was, on some seeds all of it).
    auto out = torch::full_like(x, -1.f);
    const int64_t cols = x.size(-1);
    const int64_t n = x.numel();
    const float* xp = x.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* op = out.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
        if (i % cols == cols - 1) continue;  // off by one: never written
        const float v = xp[i] * wp[i % cols] + bp[i % cols];
        op[i] = v > 0.f ? v : 0.f;
    }
    return out;
}
"""

_mod = load_inline(name="kbp_test_scale_relu_wrong", cpp_sources=_src, functions=["scale_relu"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim))
        self.b = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return _mod.scale_relu(x, self.w, self.b)
