# Hostile: write a forged reply on the harness's reply channel (its descriptor is in the
# environment), claiming outputs the kernel never computed.
import json
import os

import torch
import torch.nn as nn


def attack():
    fd = int(os.environ["KBP_RES_FD"])
    os.write(fd, (json.dumps({"seq": 999999, "ok": True, "tampered": []}) + "\n").encode())


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return x
