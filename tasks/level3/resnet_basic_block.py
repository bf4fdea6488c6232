import torch
import torch.nn as nn


class Model(nn.Module):
    """ResNet basic block with identity shortcut:
    relu(bn2(conv2(relu(bn1(conv1(x))))) + x), BatchNorm with batch statistics."""

    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels, track_running_stats=False)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels, track_running_stats=False)
        with torch.no_grad():
            for bn in (self.bn1, self.bn2):
                bn.weight.copy_(1.0 + 0.1 * torch.randn(channels))
                bn.bias.copy_(0.1 * torch.randn(channels))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + x)


batch_size = 64
channels = 128
height = 64
width = 64


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
