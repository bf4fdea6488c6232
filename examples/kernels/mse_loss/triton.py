"""Mean squared error in Triton, fused and deterministic.

Stage 1: a fixed number of programs (a few per SM) each stride over the input in 4096-element
blocks, accumulating (p - t)^2 per lane in fp32, then sum their lanes in fp64 into one partial.
Stage 2: one program sums the partials in fp64 and writes sum / n as a 0-dim float tensor. No
atomics: the result is bitwise reproducible for a given input size and GPU.
"""
import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl

_BLOCK = 4096
_FINAL_BLOCK = 1024


@triton.jit
def _sq_diff_partial_kernel(p_ptr, t_ptr, partial_ptr, n_elements, iters, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, iters):
        blk = i * nprog + pid
        offs = blk.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n_elements
        p = tl.load(p_ptr + offs, mask=mask, other=0.0)
        t = tl.load(t_ptr + offs, mask=mask, other=0.0)
        d = p - t
        acc += d * d
    tl.store(partial_ptr + pid, tl.sum(acc.to(tl.float64), axis=0))


@triton.jit
def _finalize_kernel(partial_ptr, out_ptr, n_partials, n_elements, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(0, n_partials, BLOCK):
        idx = start + offs
        acc += tl.load(partial_ptr + idx, mask=idx < n_partials, other=0.0)
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr, (total / n_elements).to(tl.float32))


@functools.lru_cache(maxsize=None)
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def mse(predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    for t in (predictions, targets):
        if not t.is_cuda or t.dtype != torch.float32:
            raise TypeError("mse: expected float32 CUDA tensors")
    if predictions.shape != targets.shape:
        raise ValueError("mse: predictions and targets differ in shape")
    p = predictions.contiguous()
    t = targets.contiguous()
    n = p.numel()
    out = torch.empty((), dtype=torch.float32, device=p.device)
    if n == 0:
        return out.fill_(float("nan"))  # mean of nothing, as the reference
    sms = _num_sms(p.device.index if p.device.index is not None else torch.cuda.current_device())
    n_blocks = triton.cdiv(n, _BLOCK)
    n_programs = min(n_blocks, sms * 4)
    iters = triton.cdiv(n_blocks, n_programs)
    partials = torch.empty(n_programs, dtype=torch.float64, device=p.device)
    _sq_diff_partial_kernel[(n_programs,)](p, t, partials, n, iters, BLOCK=_BLOCK, num_warps=8)
    _finalize_kernel[(1,)](partials, out, n_programs, n, BLOCK=_FINAL_BLOCK, num_warps=4)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return mse(predictions, targets)
