# Hostile: rewrite the task file the reference process loads, so the reference computes what this
# kernel computes (here: the identity) in every later evaluation of the task.
import sys

import torch
import torch.nn as nn


def attack():
    for mod in list(sys.modules.values()):
        path = getattr(mod, "__file__", None) or ""
        if "/tasks/" in path and path.endswith(".py"):
            with open(path, "a") as f:
                f.write("\nModel.forward = lambda self, x: x\n")
            return
    raise PermissionError("the task module was not found")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
