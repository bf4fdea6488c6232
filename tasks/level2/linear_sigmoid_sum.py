import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear (matmul + bias) -> sigmoid -> sum over the feature dimension."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.sigmoid(self.linear(x)).sum(dim=1, keepdim=True)


batch_size = 4096
in_features = 2048
out_features = 8192


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
