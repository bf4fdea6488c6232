# Hostile: replace the harness's own functions inside the candidate's process (its clock and
# synchronisation) so that the timing and the checks read what the kernel wants.
import time

import torch
import torch.nn as nn

time.perf_counter = lambda: 0.0
torch.allclose = lambda *a, **k: True


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x
