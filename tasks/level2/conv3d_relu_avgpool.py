import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d 3x3x3 -> ReLU -> AvgPool3d 2x2x2."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, 3, padding=1)
        self.pool = nn.AvgPool3d(2)

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x)))


batch_size = 4
in_channels = 32
out_channels = 32
depth = 32
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
