import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Forgets the last 8 columns: a classic remainder bug."""

    def __init__(self, dim):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim))
        self.b = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        y = torch.relu(x * self.w + self.b)
        y[:, -8:] = 0
        return y
