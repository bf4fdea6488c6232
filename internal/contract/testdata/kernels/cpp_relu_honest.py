import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_src = r"""
#include <torch/extension.h>

torch::Tensor relu(torch::Tensor x) {
    x = x.contiguous();
    auto out = torch::empty_like(x);
    const float* xp = x.data_ptr<float>();
    float* op = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
        op[i] = xp[i] > 0.f ? xp[i] : 0.f;
    }
    return out;
}
"""

_mod = load_inline(name="kbp_test_relu_honest", cpp_sources=_src, functions=["relu"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _mod.relu(x)
