# Wrong on purpose: returns zeros of the right shape. A harness whose comparison was replaced by
# an always-true one would pass it.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()

    def forward(self, x):
        return torch.zeros_like(x)
