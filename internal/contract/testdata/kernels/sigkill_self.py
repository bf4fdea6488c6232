# Ends itself with SIGKILL in forward, as the out-of-memory killer would: the record must say the
# process was killed by that signal, not that it exited with a status the shepherd made up.
import os
import signal

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()

    def forward(self, x):
        os.kill(os.getpid(), signal.SIGKILL)
        return x
