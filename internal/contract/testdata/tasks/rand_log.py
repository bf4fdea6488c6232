import torch
import torch.nn as nn


class Model(nn.Module):
    """log(x + 1e-3) on torch.rand inputs: finite on the task's own inputs, not finite (or not
    defined) where an input is below -1e-3. The probes under negated and uniform inputs are
    refused; small is kept."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.log(x + 1e-3)


def get_inputs():
    return [torch.rand(16, 256)]


def get_init_inputs():
    return []
