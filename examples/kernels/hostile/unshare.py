# Hostile: leave the sandbox's view through a new user namespace (root inside it, where mounts and
# capabilities are its own).
import ctypes

import torch
import torch.nn as nn

CLONE_NEWUSER = 0x10000000


def attack():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER) != 0:
        raise PermissionError("unshare refused (errno %d)" % ctypes.get_errno())


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
