# Hostile: write outside its own folder: the shared temporary folders, the user's home, the
# folder above its own. (/dev/shm, where a GPU worker may make files by name, is list_shm.py's.)
import os
import pwd

import torch
import torch.nn as nn


def attack():
    home = pwd.getpwuid(os.getuid()).pw_dir
    errors = []
    for d in ("/tmp", "/var/tmp", home, os.path.dirname(os.getcwd())):
        try:
            with open(os.path.join(d, "kbp-hostile-planted"), "w") as f:
                f.write("planted")
            return
        except OSError as e:
            errors.append(str(e))
    raise PermissionError("; ".join(errors))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
