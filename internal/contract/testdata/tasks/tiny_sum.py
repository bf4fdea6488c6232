import torch
import torch.nn as nn


class Model(nn.Module):
    """A row sum with a tiny weight: under zero-mean inputs the output is nearly zero everywhere."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=-1) * 1e-6


batch_size = 16
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
