import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d 3x3 -> BatchNorm2d (batch statistics) -> ReLU."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(out_channels, track_running_stats=False)
        with torch.no_grad():
            self.bn.weight.copy_(1.0 + 0.1 * torch.randn(out_channels))
            self.bn.bias.copy_(0.1 * torch.randn(out_channels))

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


batch_size = 32
in_channels = 128
out_channels = 128
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
