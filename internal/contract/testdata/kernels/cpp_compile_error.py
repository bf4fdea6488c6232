import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_src = r"""
#include <torch/extension.h>

torch::Tensor scale_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto out = torch::empty_like(x)
    return out;
}
"""

_mod = load_inline(name="kbp_test_compile_error", cpp_sources=_src, functions=["scale_relu"])


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim))
        self.b = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return _mod.scale_relu(x, self.w, self.b)
