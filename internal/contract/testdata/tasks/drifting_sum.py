import os

import torch
import torch.nn as nn


class Model(nn.Module):
    """A row sum plus noise that no seed controls, far beyond any tolerance: a reference that
    cannot judge a candidate."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        g = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))
        return x.sum(dim=-1) + torch.rand(x.shape[:-1], generator=g)


batch_size = 16
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
