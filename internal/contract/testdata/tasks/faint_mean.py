import torch
import torch.nn as nn


class Model(nn.Module):
    """A faint mean: under zero-mean inputs the output is within the tolerance of zero whatever
    the seed (and under the per-element scaling of the scaled distribution too); inputs with a
    mean of their own move it beyond."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.mean() * 1e-3


size = 65536


def get_inputs():
    return [torch.randn(size)]


def get_init_inputs():
    return []
