import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose2d (stride 2) -> subtract a learned per-channel bias -> tanh -> scale."""

    def __init__(self, in_channels, out_channels, scale):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size=3, stride=2, padding=1, output_padding=1)
        self.shift = nn.Parameter(0.1 * torch.randn(out_channels, 1, 1))
        self.scale = scale

    def forward(self, x):
        x = self.deconv(x) - self.shift
        return torch.tanh(x) * self.scale


batch_size = 32
in_channels = 128
out_channels = 64
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, 2.5]
