import os

import torch
import torch.nn as nn


class Model(nn.Module):
    """scale_relu, except that get_inputs draws from a generator of its own, seeded from the OS:
    the reference and the candidate each make different inputs, whatever the harness seeds."""

    def __init__(self, dim):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim))
        self.b = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return torch.relu(x * self.w + self.b)


batch_size = 64
dim = 256


def get_inputs():
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))
    return [torch.randn(batch_size, dim, generator=g)]


def get_init_inputs():
    return [dim]
