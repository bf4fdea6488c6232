# Hostile: open the reference process's memory through /proc/<pid>/mem, and its open files
# through /proc/<pid>/fd/<n> (listing the descriptors' numbers is allowed to anyone; opening or
# following one needs the right to trace the process), to read or overwrite its outputs.
import os

import torch
import torch.nn as nn


def attack():
    errors = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if b"reference" in args:
            try:
                with open("/proc/%s/mem" % name, "r+b"):
                    return
            except OSError as e:
                errors.append(str(e))
            try:
                fds = os.listdir("/proc/%s/fd" % name)
            except OSError as e:
                errors.append(str(e))
                continue
            for fd in fds:
                try:
                    os.readlink("/proc/%s/fd/%s" % (name, fd))
                    return
                except OSError as e:
                    errors.append(str(e))
    raise PermissionError("; ".join(errors) or "no reference process found")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
