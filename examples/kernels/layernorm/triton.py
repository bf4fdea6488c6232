"""LayerNorm over the trailing dimension(s) in Triton: one program per row.

Pass 1 walks the row in blocks; each lane keeps Welford statistics (count, mean, M2) of the
elements it saw (full blocks need no masks and share one reciprocal; the partial last block is
masked), and the lanes are combined with Chan's formula (total M2 = sum of lane M2 +
sum of count * (lane mean - row mean)^2), which avoids E[x^2] - E[x]^2 cancellation when the mean
is large. Pass 2 re-reads the row and writes (x - mean) * rstd * weight + bias.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)
    mean = tl.zeros([BLOCK], dtype=tl.float32)
    m2 = tl.zeros([BLOCK], dtype=tl.float32)
    # Full blocks: every lane has seen exactly i elements before block i, so the Welford update
    # divides by the same scalar i + 1 in all lanes (one reciprocal per block, no masks).
    n_full = n_cols // BLOCK
    for i in range(0, n_full):
        x = tl.load(x_row + i * BLOCK + cols)
        delta = x - mean
        mean += delta * (1.0 / (i + 1))
        m2 += delta * (x - mean)
    cnt = tl.zeros([BLOCK], dtype=tl.float32) + n_full
    # Partial last block: only the lanes it covers are updated.
    tail = n_full * BLOCK
    if tail < n_cols:
        offs = tail + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0)
        cnt_new = cnt + tl.where(mask, 1.0, 0.0)
        delta = x - mean
        mean_new = mean + tl.where(mask, delta / tl.maximum(cnt_new, 1.0), 0.0)
        m2 += tl.where(mask, delta * (x - mean_new), 0.0)
        mean = mean_new
        cnt = cnt_new
    # Chan: combine the lanes' (count, mean, M2).
    total = tl.sum(cnt, axis=0)
    row_mean = tl.sum(cnt * mean, axis=0) / total
    dev = mean - row_mean
    row_m2 = tl.sum(m2, axis=0) + tl.sum(cnt * dev * dev, axis=0)
    rstd = 1.0 / tl.sqrt(row_m2 / total + eps)
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0)
        tl.store(y_row + offs, (x - row_mean) * rstd * w + b, mask=mask)


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    for t in (x, weight, bias):
        if not t.is_cuda or t.dtype != torch.float32:
            raise TypeError("layernorm: expected float32 CUDA tensors")
    x = x.contiguous()
    weight = weight.contiguous()
    bias = bias.contiguous()
    n_cols = weight.numel()
    if n_cols == 0 or bias.numel() != n_cols or x.numel() % n_cols != 0:
        raise ValueError("layernorm: input does not end in the normalized shape")
    y = torch.empty_like(x)
    n_rows = x.numel() // n_cols
    if n_rows == 0:
        return y
    block = max(16, min(4096, triton.next_power_of_2(n_cols)))
    num_warps = 8 if block >= 4096 else (4 if block >= 1024 else 2)
    _layernorm_kernel[(n_rows,)](x, weight, bias, y, n_cols, eps, BLOCK=block, num_warps=num_warps)
    return y


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        # Same parameter names, shapes and creation order as the reference (ln.weight, ln.bias);
        # the nn.LayerNorm's forward is never called.
        self.ln = nn.LayerNorm(normalized_shape=dim)

    def forward(self, x):
        shape = tuple(self.ln.normalized_shape)
        if tuple(x.shape[x.dim() - len(shape):]) != shape:
            raise ValueError(f"input shape {tuple(x.shape)} does not end in {shape}")
        return layernorm(x, self.ln.weight, self.ln.bias, self.ln.eps)
