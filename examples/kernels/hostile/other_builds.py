# Hostile: reach the build cache of every kernel (beside the extracted worker) to load another
# kernel's compiled extension as its own, or to replace it.
import os
import sys

import torch
import torch.nn as nn


def attack():
    cache = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(sys.modules["kbpworker"].__file__))))
    kernels = os.path.join(cache, "kernels")
    for key in os.listdir(kernels):
        for root, _, files in os.walk(os.path.join(kernels, key)):
            for f in files:
                if f.endswith(".so"):
                    with open(os.path.join(root, f), "r+b") as so:
                        so.write(b"\0")
                    return
    os.listdir(cache)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
