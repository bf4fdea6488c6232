import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean squared error between two tensors, reduced to a 0-dim tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)


batch_size = 4096
dim = 90112


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
