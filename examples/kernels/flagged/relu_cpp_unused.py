"""FLAGGED ON PURPOSE (no_custom_kernel), on the CPU: a C++ ReLU extension that is built and never
called; forward computes with PyTorch's clamp_min reached through getattr.

The runtime evidence counts the candidate's calls into its own extension during a profiled
forward: none, so no_custom_kernel, on a pass. The CPU case of the runtime flags (the contract's
tests run the same idea in CI: internal/contract/testdata/kernels/cpp_unused_ext.py).
Not one of the bundled examples: flagged/kernels.yaml lists it for `kbplatform eval --kernel`.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* src = xc.data_ptr<float>();
    float* dst = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) dst[i] = src[i] < 0.f ? 0.f : src[i];
    return y;
}
"""

_ext = load_inline(name="kbp_flagged_relu_cpp_unused", cpp_sources=_CPP_SOURCE, functions=["relu_forward"],
                   extra_cflags=["-O2"], verbose=False)
_clamp = getattr(torch.Tensor, "clamp" + "_min")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = _ext

    def forward(self, x):
        return _clamp(x, 0.0)
