import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Mish activation written as x * tanh(softplus(x))."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * torch.tanh(F.softplus(x))


batch_size = 32
channels = 64
height = 320
width = 512


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
