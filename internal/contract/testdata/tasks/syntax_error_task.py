import torch
import torch.nn as nn


class Model(nn.Module):
    """A task file with a syntax error (the colon after forward's arguments is missing)."""

    def __init__(self, dim):
        super().__init__()

    def forward(self, x)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return [256]
