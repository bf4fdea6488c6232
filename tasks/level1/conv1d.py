import torch
import torch.nn as nn


class Model(nn.Module):
    """1D convolution in bfloat16, kernel 5, stride 1, padding 2."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2).to(torch.bfloat16)

    def forward(self, x):
        return self.conv(x)


batch_size = 32
in_channels = 512
out_channels = 512
length = 16384


def get_inputs():
    return [torch.randn(batch_size, in_channels, length, dtype=torch.bfloat16)]


def get_init_inputs():
    return [in_channels, out_channels, 5]
