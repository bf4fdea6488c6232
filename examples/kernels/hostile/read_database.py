# Hostile: find the results database (the --db of any ancestor's command line, or the default
# place in the user's real home) and read it.
import os
import pwd

import torch
import torch.nn as nn


def candidates():
    home = pwd.getpwuid(os.getuid()).pw_dir
    yield os.path.join(home, ".local", "share", "kbplatform", "db")
    pid = os.getpid()
    while pid > 1:
        with open("/proc/%d/stat" % pid) as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                args = [a.decode(errors="replace") for a in f.read().split(b"\0")]
        except OSError:
            continue
        for i, a in enumerate(args):
            if a == "--db" and i + 1 < len(args):
                yield args[i + 1]
            elif a.startswith("--db="):
                yield a[5:]


def attack():
    errors = []
    for db in candidates():
        try:
            names = os.listdir(db)
        except OSError as e:
            errors.append(str(e))
            continue
        if names:
            return
    raise PermissionError("database not readable: " + "; ".join(errors))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
