# Hostile: open a perf event (hardware counters of other processes, a side channel on the timed
# reference).
import ctypes
import platform

import torch
import torch.nn as nn

NR = {"x86_64": 298, "aarch64": 241}


def attack():
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_char * 128)()
    ctypes.memmove(attr, (ctypes.c_uint32 * 2)(0, 128), 8)  # type PERF_TYPE_HARDWARE, size
    fd = libc.syscall(NR[platform.machine()], attr, -1, 0, -1, 0)  # every process on CPU 0
    if fd < 0:
        raise PermissionError("perf_event_open refused (errno %d)" % ctypes.get_errno())


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
