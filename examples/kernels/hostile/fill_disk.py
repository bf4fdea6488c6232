# Hostile: fill the disk: a file past any reasonable size in its own folder (written sparse, at an
# offset, so that a failure of the limit costs no space), and writes where its folder is not.
import os

import torch
import torch.nn as nn


def attack():
    with open("huge.bin", "wb") as f:
        f.seek(64 << 30)
        f.write(b"x")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        try:
            attack()
        finally:
            if os.path.exists("huge.bin"):
                os.unlink("huge.bin")
        return torch.relu(x)
