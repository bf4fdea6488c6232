import torch
import torch.nn as nn


class Model(nn.Module):
    """Group normalization over an NCHW tensor with a per-channel affine transform."""

    def __init__(self, num_groups, num_channels):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, num_channels)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(num_channels))
            self.norm.bias.copy_(0.1 * torch.randn(num_channels))

    def forward(self, x):
        return self.norm(x)


batch_size = 32
channels = 128
groups = 16
height = 256
width = 320


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [groups, channels]
