# Hostile: open a TCP connection to a service on this host (read from /proc/net/tcp: the suite
# listens on loopback) or anywhere else: a channel to send results and keys out.
import socket

import torch
import torch.nn as nn


def listening():
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A":  # LISTEN
                ip, port = local.split(":")
                yield ".".join(str(int(ip[i:i + 2], 16)) for i in (6, 4, 2, 0)), int(port, 16)


def attack():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    for ip, port in listening():
        if ip in ("0.0.0.0", "127.0.0.1"):
            s.connect(("127.0.0.1", port))
            return
    raise PermissionError("no listening service found")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
