import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Pre-norm transformer MLP block in bfloat16: x + Linear(GELU(Linear(LayerNorm(x))))."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(dim))
            self.norm.bias.copy_(0.1 * torch.randn(dim))
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.to(torch.bfloat16)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


tokens = 32768
dim = 2048
hidden = 8192


def get_inputs():
    return [torch.randn(tokens, dim, dtype=torch.bfloat16)]


def get_init_inputs():
    return [dim, hidden]
