# Hostile: signal the processes above the worker (the target plugin that drives the contract, the
# command the user ran): stopping or killing the driver would end the evaluation on the kernel's
# terms. Signal 0 only checks the permission, so a failure of the sandbox harms nothing.
import os

import torch
import torch.nn as nn


def attack():
    shepherd = os.getppid()
    with open("/proc/%d/stat" % shepherd) as f:
        driver = int(f.read().rsplit(")", 1)[1].split()[1])
    os.kill(driver, 0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
