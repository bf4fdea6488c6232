import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B^T in bfloat16, where B is stored row-major as (N, K)."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B.t())


M = 16384
N = 16384
K = 4096


def get_inputs():
    A = torch.randn(M, K, dtype=torch.bfloat16)
    B = torch.randn(N, K, dtype=torch.bfloat16)
    return [A, B]


def get_init_inputs():
    return []
