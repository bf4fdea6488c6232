# Hostile: plant a module in the worker's folder (first on sys.path of every worker) that would
# shadow a real one in the next evaluation's processes.
import os
import sys

import torch
import torch.nn as nn


def attack():
    folder = os.path.dirname(os.path.dirname(sys.modules["kbpworker"].__file__))
    with open(os.path.join(folder, "sitecustomize.py"), "w") as f:
        f.write("import builtins\n")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
