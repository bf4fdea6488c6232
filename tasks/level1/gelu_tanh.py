import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """GELU, tanh approximation (as in GPT-2), written out in elementwise torch ops:
    0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""

    def __init__(self):
        super().__init__()
        self.c = math.sqrt(2.0 / math.pi)

    def forward(self, x):
        inner = self.c * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))


batch_size = 8192
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
