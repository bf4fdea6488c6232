# Hostile: list /dev/shm and read what is there: other programs' shared memory, torch's CUDA IPC
# reference counts, and (where the work folder is on /dev/shm) the other evaluations' folders. On
# the CPU a worker has no access to /dev/shm at all; on a GPU it may make files there by name, but
# never list it.
import os

import torch
import torch.nn as nn


def attack():
    for name in os.listdir("/dev/shm"):
        path = os.path.join("/dev/shm", name)
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, "rb").close()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
