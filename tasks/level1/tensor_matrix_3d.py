import torch
import torch.nn as nn


class Model(nn.Module):
    """3D tensor times matrix: (B, L, K) @ (K, N) -> (B, L, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, X, W):
        return torch.matmul(X, W)


batch = 16
length = 1024
K = 2048
N = 2048


def get_inputs():
    X = torch.randn(batch, length, K)
    W = torch.randn(K, N) / K ** 0.5
    return [X, W]


def get_init_inputs():
    return []
