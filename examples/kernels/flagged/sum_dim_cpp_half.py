"""FLAGGED ON PURPOSE (precision_downcast), on the CPU: sum over the middle dimension, accumulated
in fp32 but stored through fp16 (c10::Half), on a float32 task whose tolerance (1e-3) lets it pass.

The CPU twin of sum_dim_cuda_half.py: every trial passes, and the precision measured against a
float64 run of the task (~12 bits) raises precision_downcast on the pass.
Not one of the bundled examples: flagged/kernels.yaml lists it for `kbplatform eval --kernel`.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = r"""
#include <torch/extension.h>
#include <vector>

torch::Tensor sum_mid_half(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && x.dim() == 3, "sum_mid_half: expected a 3-D float32 CPU tensor");
    auto xc = x.contiguous();
    const int64_t batch = xc.size(0), reduce = xc.size(1), inner = xc.size(2);
    auto y = torch::empty({batch, 1, inner}, xc.options());
    const float* src = xc.data_ptr<float>();
    float* dst = y.data_ptr<float>();
    std::vector<float> acc(inner);
    for (int64_t b = 0; b < batch; ++b) {
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int64_t r = 0; r < reduce; ++r) {
            const float* row = src + (b * reduce + r) * inner;
            for (int64_t i = 0; i < inner; ++i) acc[i] += row[i];
        }
        for (int64_t i = 0; i < inner; ++i) dst[b * inner + i] = static_cast<float>(c10::Half(acc[i]));  // the downcast
    }
    return y;
}
"""

_ext = load_inline(name="kbp_flagged_sum_mid_half_cpp", cpp_sources=_CPP_SOURCE, functions=["sum_mid_half"],
                   extra_cflags=["-O2"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        if dim != 1:
            raise ValueError("this kernel sums over dimension 1")

    def forward(self, x):
        return _ext.sum_mid_half(x)
