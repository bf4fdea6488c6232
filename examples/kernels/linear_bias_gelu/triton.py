"""Linear + bias + GELU(tanh) + scale in Triton: one matmul kernel with a fused epilogue.

y = x @ W^T is tiled like a plain matmul, with tl.dot in IEEE fp32 (no TF32); W^T is copied to a
row-major K x N buffer on each call (32 MB at the gpu size, ~20 us) so that B tiles are read along
N. Before the tile is stored, the epilogue adds the bias, applies GELU with the tanh
approximation and multiplies by `scale`. It uses the identity
0.5 v (1 + tanh(u)) = v * sigmoid(2u) = v / (1 + exp(-2u)), u = sqrt(2/pi) (v + 0.044715 v^3),
which is exact, needs one exp and saturates cleanly (exp overflow gives v / inf = -0).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_bias_gelu_kernel(x_ptr, wt_ptr, bias_ptr, y_ptr, M, N, K, scale,
                             stride_xm, stride_xk, stride_wtk, stride_wtn, stride_ym, stride_yn,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                             GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pids_per_group = GROUP_M * num_pid_n
    group = pid // pids_per_group
    first_m = group * GROUP_M
    group_rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % pids_per_group) % group_rows
    pid_n = (pid % pids_per_group) // group_rows

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # A = x (M x K); B = W^T (K x N)
    a_ptrs = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm + offs_k[None, :] * stride_xk
    b_ptrs = wt_ptr + offs_k[:, None].to(tl.int64) * stride_wtk + offs_n[None, :] * stride_wtn
    m_mask = offs_m[:, None] < M
    n_mask = offs_n[None, :] < N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + offs_k) < K
        a = tl.load(a_ptrs, mask=m_mask & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & n_mask, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_xk
        b_ptrs += BLOCK_K * stride_wtk

    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
    v = acc + bias[None, :]
    u = 0.7978845608028654 * (v + 0.044715 * v * v * v)
    out = v / (1.0 + tl.exp(-2.0 * u)) * scale

    y_ptrs = y_ptr + offs_m[:, None].to(tl.int64) * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, out, mask=m_mask & n_mask)


# Fastest of the configurations tried on an H200 at the gpu size.
_BLOCK_M, _BLOCK_N, _BLOCK_K, _GROUP_M = 64, 128, 32, 8
_NUM_WARPS, _NUM_STAGES = 4, 3


def linear_bias_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    for t in (x, weight, bias):
        if not t.is_cuda or t.dtype != torch.float32:
            raise TypeError("linear_bias_gelu: expected float32 CUDA tensors")
    if weight.dim() != 2 or bias.shape != (weight.shape[0],) or x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError("linear_bias_gelu: shape mismatch")
    N, K = weight.shape
    lead = x.shape[:-1]
    x2 = x.reshape(-1, K).contiguous()
    # W^T as a K x N row-major copy, made on every call: the fp32 FMA dot reads B tiles along N,
    # and a k-contiguous B (W itself read through strides) ran about twice as slow.
    wt = weight.t().contiguous()
    bias = bias.contiguous()
    M = x2.shape[0]
    y = torch.empty((M, N), dtype=torch.float32, device=x.device)
    if M > 0 and N > 0:
        grid = (triton.cdiv(M, _BLOCK_M) * triton.cdiv(N, _BLOCK_N),)
        _linear_bias_gelu_kernel[grid](
            x2, wt, bias, y, M, N, K, float(scale),
            x2.stride(0), x2.stride(1), wt.stride(0), wt.stride(1), y.stride(0), y.stride(1),
            BLOCK_M=_BLOCK_M, BLOCK_N=_BLOCK_N, BLOCK_K=_BLOCK_K, GROUP_M=_GROUP_M,
            num_warps=_NUM_WARPS, num_stages=_NUM_STAGES,
        )
    return y.reshape(*lead, N)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        # Same parameter names, shapes and creation order as the reference (linear.weight,
        # linear.bias); the nn.Linear's forward is never called.
        self.linear = nn.Linear(in_features, out_features)
        self.scale = float(scale)

    def forward(self, x):
        return linear_bias_gelu(x, self.linear.weight, self.linear.bias, self.scale)
