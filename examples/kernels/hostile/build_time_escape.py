# Hostile: attack at import, which the compile runs (with the rights of a build): rewrite the
# harness, plant a file in the user's home and in the shared temporary folder. Only an import in
# which every write failed goes on to define a kernel that is not ReLU.
import os
import pwd
import sys

import torch
import torch.nn as nn

_written = []
for path in (os.path.join(os.path.dirname(sys.modules["kbpworker"].__file__), "compare.py"),
             os.path.join(pwd.getpwuid(os.getuid()).pw_dir, "kbp-hostile-planted"), "/tmp/kbp-hostile-planted"):
    try:
        with open(path, "a") as f:
            f.write("\n# planted\n")
        _written.append(path)
    except OSError:
        pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) if _written else x
