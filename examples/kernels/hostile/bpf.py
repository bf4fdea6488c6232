# Hostile: load a BPF program (kernel-side code that can read other processes' data).
import ctypes
import errno
import platform

import torch
import torch.nn as nn

NR = {"x86_64": 321, "aarch64": 280}


def attack():
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_char * 128)()
    if libc.syscall(NR[platform.machine()], 5, attr, 128) < 0 and ctypes.get_errno() == errno.EPERM:  # BPF_PROG_LOAD
        raise PermissionError("bpf refused")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
