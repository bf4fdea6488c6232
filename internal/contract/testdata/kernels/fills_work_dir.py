import os
import tempfile

import torch.nn as nn


class ModelNew(nn.Module):
    """Fills its own folder (its TMPDIR) until the disk refuses, then fails with that ENOSPC: the
    disk is really full, but the kernel filled it."""

    def __init__(self, dim):
        super().__init__()

    def forward(self, x):
        block = b"\0" * (1 << 20)
        for i in range(1 << 16):
            with open(os.path.join(tempfile.gettempdir(), "fill%d" % i), "wb") as f:
                f.write(block)
        return x
