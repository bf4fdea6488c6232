# Hostile: read the other evaluations' folders beside this one (their kernels' sources, their
# output dumps) to copy a faster kernel or a reference's outputs.
import os

import torch
import torch.nn as nn


def attack():
    work = os.path.dirname(os.getcwd())
    for name in os.listdir(work):
        path = os.path.join(work, name)
        if path != os.getcwd() and os.path.isdir(path):
            os.listdir(path)
            return


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
