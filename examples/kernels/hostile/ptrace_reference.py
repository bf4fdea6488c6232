# Hostile: attach to the reference process (the clean one whose outputs decide the verdict) with
# ptrace, to change what it computes.
import ctypes
import os

import torch
import torch.nn as nn

PTRACE_ATTACH, PTRACE_DETACH = 16, 17


def reference_pids():
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/cmdline" % name, "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            if any(a.endswith(b"run.py") for a in args) and b"reference" in args:
                yield int(name)


def attack():
    libc = ctypes.CDLL(None, use_errno=True)
    pids = list(reference_pids())
    for pid in pids:
        if libc.ptrace(PTRACE_ATTACH, pid, None, None) == 0:
            libc.ptrace(PTRACE_DETACH, pid, None, None)
            return
    raise PermissionError("ptrace refused (errno %d) on %d reference process(es)" % (ctypes.get_errno(), len(pids)))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
