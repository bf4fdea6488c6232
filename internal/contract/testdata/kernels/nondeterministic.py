import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Right on the first call for each input, different on the repeat (a racy reduction, say)."""

    def __init__(self, dim):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim))
        self.b = nn.Parameter(torch.randn(dim))
        self.flip = False

    def forward(self, x):
        y = torch.relu(x * self.w + self.b)
        self.flip = not self.flip
        if not self.flip:
            y = y + 1e-2 * torch.rand_like(y)
        return y
