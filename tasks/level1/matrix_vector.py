import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix-vector product y = A @ x, with x given as a (K, 1) column."""

    def __init__(self):
        super().__init__()

    def forward(self, A, x):
        return torch.matmul(A, x)


M = 26624
K = 43008


def get_inputs():
    A = torch.randn(M, K)
    x = torch.randn(K, 1) / K ** 0.5
    return [A, x]


def get_init_inputs():
    return []
