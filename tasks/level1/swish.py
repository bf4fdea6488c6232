import torch
import torch.nn as nn


class Model(nn.Module):
    """Swish with a fixed beta: x * sigmoid(beta * x)."""

    def __init__(self, beta):
        super().__init__()
        self.beta = beta

    def forward(self, x):
        return x * torch.sigmoid(self.beta * x)


batch_size = 16384
dim = 20480


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [1.702]
