import torch
import torch.nn as nn


class Model(nn.Module):
    """The mean of a centred tensor: zero, up to rounding, whatever the inputs (as the mean of a
    group-normalised tensor is its bias)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (x - x.mean()).mean()


size = 4096


def get_inputs():
    return [torch.randn(size)]


def get_init_inputs():
    return []
