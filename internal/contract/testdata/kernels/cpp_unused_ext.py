# Builds a C++ extension but never calls it: forward computes with PyTorch's own operators, reached
# through getattr so that no static rule names them. Correct; the runtime evidence must flag
# no_custom_kernel.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_src = r"""
#include <torch/extension.h>

torch::Tensor scale_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    return (x * w + b).clamp_min(0);
}
"""

_mod = load_inline(name="kbp_test_unused_ext", cpp_sources=_src, functions=["scale_relu"], extra_cflags=["-O1"])
_ops = getattr(torch, "re" + "lu")


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim))
        self.b = nn.Parameter(torch.randn(dim))
        self.kernel = _mod

    def forward(self, x):
        return _ops(torch.addcmul(self.b, x, self.w))
