import torch
import torch.nn as nn


class Model(nn.Module):
    """Leaky ReLU written with torch.where: x if x > 0 else negative_slope * x."""

    def __init__(self, negative_slope):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return torch.where(x > 0, x, x * self.negative_slope)


batch_size = 16384
dim = 20480


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [0.05]
