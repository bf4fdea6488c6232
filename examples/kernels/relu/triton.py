"""ReLU in Triton: one program per 1024-element block, masked at the end."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

_BLOCK = 1024  # 1024 x 8 warps measured fastest on an H200 (at copy speed)


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.where(x < 0.0, 0.0, x)  # NaN stays NaN
    tl.store(y_ptr + offs, y, mask=mask)


def relu(x: torch.Tensor) -> torch.Tensor:
    if not x.is_cuda or x.dtype != torch.float32:
        raise TypeError("relu: expected a float32 CUDA tensor")
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n > 0:
        _relu_kernel[(triton.cdiv(n, _BLOCK),)](x, y, n, BLOCK=_BLOCK, num_warps=8)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu(x)
