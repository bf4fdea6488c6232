import torch
import torch.nn as nn


class Model(nn.Module):
    """y = LayerNorm(scale * Linear(x) + x): a GEMM, a scaling, a residual add and a LayerNorm."""

    def __init__(self, features, scale):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.scale = scale
        self.norm = nn.LayerNorm(features)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(features))
            self.norm.bias.copy_(0.1 * torch.randn(features))

    def forward(self, x):
        y = self.linear(x) * self.scale + x
        return self.norm(y)


batch_size = 4096
features = 4096


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, 0.5]
