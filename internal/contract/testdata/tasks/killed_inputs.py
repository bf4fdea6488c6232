import os
import signal

import torch
import torch.nn as nn


class Model(nn.Module):
    """scale_relu, except that get_inputs ends its process with SIGKILL, as the kernel's OOM
    killer ends one whose inputs do not fit the host's memory. The model and its init inputs
    are fine: the reference loads, and the first process to make inputs dies."""

    def __init__(self, dim):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim))
        self.b = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return torch.relu(x * self.w + self.b)


batch_size = 64
dim = 256


def get_inputs():
    os.kill(os.getpid(), signal.SIGKILL)
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
