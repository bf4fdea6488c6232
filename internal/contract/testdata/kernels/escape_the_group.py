# slow_the_reference, but its helpers leave the worker's process group and its process tree:
# each starts a new session (setsid) and forks again, and the middle process exits, so the
# helper is an orphan in a session of its own. Stopping or killing the worker's process group
# does not reach it. Each helper appends its pid to $KBP_TEST_PIDFILE when that is set.
import multiprocessing as mp
import os
import time

import torch
import torch.nn as nn

_inside = mp.Value("i", 0, lock=False)


def _spin(flag):
    while True:
        if flag.value:
            time.sleep(0.0002)
            continue
        end = time.monotonic() + 0.005
        while time.monotonic() < end:
            pass


def _escape(flag):
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    path = os.environ.get("KBP_TEST_PIDFILE")
    if path:
        with open(path, "a") as f:
            f.write("%d\n" % os.getpid())
    _spin(flag)


_ctx = mp.get_context("fork")
for _ in range(3):
    p = _ctx.Process(target=_escape, args=(_inside,))
    p.start()
    p.join()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        _inside.value = 1
        try:
            return torch.matmul(a, b)
        finally:
            _inside.value = 0
