# Hostile: reach a service on an abstract unix socket (no file to protect it; the suite listens on
# "@kbp-hostile").
import socket

import torch
import torch.nn as nn


def attack():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0kbp-hostile")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
