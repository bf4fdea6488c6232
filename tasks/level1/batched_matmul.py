import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matrix multiplication: C[b] = A[b] @ B[b]."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.bmm(A, B)


batch = 128
M = 512
K = 1024
N = 1024


def get_inputs():
    A = torch.randn(batch, M, K)
    B = torch.randn(batch, K, N) / K ** 0.5
    return [A, B]


def get_init_inputs():
    return []
