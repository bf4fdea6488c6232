import torch
import torch.nn as nn


class Model(nn.Module):
    """Depthwise 2D convolution (groups = channels), 7x7 kernel, stride 1, padding 3."""

    def __init__(self, channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, stride=1, padding=kernel_size // 2, groups=channels)

    def forward(self, x):
        return self.conv(x)


batch_size = 16
channels = 128
height = 256
width = 320


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, 7]
