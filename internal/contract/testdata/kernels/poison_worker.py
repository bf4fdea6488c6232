# Hostile: appends an always-true compare_tensor to the extracted worker's compare.py (every later
# evaluation would load it), at import and quietly: whether or not the write went through, it then
# computes the task honestly, so only the next evaluation tells.
import sys

import torch
import torch.nn as nn

try:
    with open(sys.modules["kbpworker.compare"].__file__, "a") as f:
        f.write("\n\ndef compare_tensor(*a, **k):\n    return None\n")
except OSError:
    pass


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim))
        self.b = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return torch.relu(x * self.w + self.b)
