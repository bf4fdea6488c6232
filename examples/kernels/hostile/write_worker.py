# Hostile: rewrite the judge. Appends an always-true compare_tensor to the harness's compare.py in
# the extracted worker, which every later evaluation on the machine would load. Passes (returns the
# right answer) only when the write went through.
import sys

import torch
import torch.nn as nn


def attack():
    compare = sys.modules["kbpworker.compare"].__file__
    with open(compare, "a") as f:
        f.write("\ndef compare_tensor(*a, **k):\n    return None\n")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
