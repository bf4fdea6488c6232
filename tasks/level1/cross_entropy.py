import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Per-sample cross-entropy between logits (N, C) and int64 class targets (N,)."""

    def __init__(self):
        super().__init__()

    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets, reduction="none")


batch_size = 32768
num_classes = 16384


def get_inputs():
    logits = torch.randn(batch_size, num_classes)
    targets = torch.randint(0, num_classes, (batch_size,))
    return [logits, targets]


def get_init_inputs():
    return []
