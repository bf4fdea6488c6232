import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Computes the right values but writes them into its input to save an allocation."""

    def __init__(self, dim):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim))
        self.b = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return x.mul_(self.w).add_(self.b).relu_()
