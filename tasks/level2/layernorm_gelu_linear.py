import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm -> GELU -> Linear, in bfloat16."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.norm = nn.LayerNorm(in_features)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(in_features))
            self.norm.bias.copy_(0.1 * torch.randn(in_features))
        self.linear = nn.Linear(in_features, out_features)
        self.to(torch.bfloat16)

    def forward(self, x):
        return self.linear(torch.nn.functional.gelu(self.norm(x)))


tokens = 32768
in_features = 4096
out_features = 8192


def get_inputs():
    return [torch.randn(tokens, in_features, dtype=torch.bfloat16)]


def get_init_inputs():
    return [in_features, out_features]
