import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B for a tall-by-wide pair of rectangular matrices."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


M = 4096
K = 2048
N = 8192


def get_inputs():
    A = torch.randn(M, K)
    B = torch.randn(K, N) / K ** 0.5
    return [A, B]


def get_init_inputs():
    return []
