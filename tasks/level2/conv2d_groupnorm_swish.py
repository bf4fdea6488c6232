import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d 3x3 -> GroupNorm -> Swish (x * sigmoid(x))."""

    def __init__(self, in_channels, out_channels, num_groups):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.norm = nn.GroupNorm(num_groups, out_channels)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(out_channels))
            self.norm.bias.copy_(0.1 * torch.randn(out_channels))

    def forward(self, x):
        x = self.norm(self.conv(x))
        return x * torch.sigmoid(x)


batch_size = 32
in_channels = 64
out_channels = 128
groups = 16
height = 160
width = 160


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, groups]
