import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear -> GroupNorm over the features -> HardTanh."""

    def __init__(self, in_features, out_features, num_groups):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(num_groups, out_features)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(out_features))
            self.norm.bias.copy_(0.1 * torch.randn(out_features))

    def forward(self, x):
        return F.hardtanh(self.norm(self.linear(x)), min_val=-1.0, max_val=1.0)


batch_size = 8192
in_features = 2048
out_features = 4096
groups = 32


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, groups]
