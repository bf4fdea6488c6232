import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed 2D convolution that doubles the spatial size: kernel 4, stride 2, padding 1."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size=4, stride=2, padding=1)

    def forward(self, x):
        return self.deconv(x)


batch_size = 16
in_channels = 128
out_channels = 64
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
