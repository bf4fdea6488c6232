import os

import torch
import torch.nn as nn


class Model(nn.Module):
    """A row sum in an order that changes from call to call, as a GPU reduction by atomic adds
    does (cuDNN's transposed convolutions): the result varies in its last bits, never by more than
    float32's rounding."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        g = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))
        perm = torch.randperm(x.shape[-1], generator=g)
        return x[..., perm].sum(dim=-1)


batch_size = 16
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
