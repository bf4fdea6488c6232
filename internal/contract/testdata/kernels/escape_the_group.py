# slow_the_reference, but its helpers leave the worker's process group and its process tree:
# each starts a new session (setsid) and forks again, and the middle process exits, so the
# helper is an orphan in a session of its own. Stopping or killing the worker's process group
# does not reach it. Each helper names itself kbp-escaped (its comm), for the test to find.
import ctypes
import mmap
import os
import time

import torch
import torch.nn as nn

# A flag shared with the forked helpers: an anonymous shared mapping (the sandbox leaves no
# /dev/shm for multiprocessing's shared values).
_inside = mmap.mmap(-1, 1)
PR_SET_NAME = 15


def _spin(flag):
    while True:
        if flag[0]:
            time.sleep(0.0002)
            continue
        end = time.monotonic() + 0.005
        while time.monotonic() < end:
            pass


def _escape(flag):
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    ctypes.CDLL(None).prctl(PR_SET_NAME, b"kbp-escaped", 0, 0, 0)
    _spin(flag)


for _ in range(3):
    pid = os.fork()
    if pid == 0:
        _escape(_inside)
    os.waitpid(pid, 0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        _inside[0] = 1
        try:
            return torch.matmul(a, b)
        finally:
            _inside[0] = 0
