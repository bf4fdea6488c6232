# Hostile: read the user's files in their real home (where SSH keys, shell history and credentials
# live), here the canary file the hostile suite plants there.
import os
import pwd

import torch
import torch.nn as nn


def attack():
    home = pwd.getpwuid(os.getuid()).pw_dir
    with open(os.path.join(home, ".kbplatform-hostile-canary")) as f:
        print("leaked: " + f.read())


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
