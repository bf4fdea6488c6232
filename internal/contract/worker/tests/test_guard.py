import functools
import importlib.abc
import importlib.util
import sys
import time

import torch

from kbpworker import __main__ as worker
from kbpworker import guard, harness


def test_detects_patches_and_restores_cleanly():
    g = guard.Guard()
    g.capture((harness,))
    assert g.check() == []
    orig_allclose, orig_clock = torch.allclose, time.perf_counter
    orig_perf = harness._perf_ns
    try:
        torch.allclose = lambda *a, **k: True
        time.perf_counter = lambda: 0.0
        harness._perf_ns = lambda: 0
        found = g.check()
        assert "torch.allclose replaced" in found
        assert "time.perf_counter replaced" in found
        assert "kbpworker.harness._perf_ns replaced" in found
    finally:
        torch.allclose, time.perf_counter = orig_allclose, orig_clock
        harness._perf_ns = orig_perf
    assert g.check() == []


def test_detects_class_and_module_swaps():
    g = guard.Guard()
    g.capture((harness,))
    orig = harness.Session.timed
    real_time = sys.modules["time"]
    try:
        harness.Session.timed = lambda *a, **k: None
        sys.modules["time"] = type(sys)("time")
        found = g.check()
        assert "kbpworker.harness.Session.timed replaced" in found
        assert "sys.modules['time'] replaced" in found
    finally:
        harness.Session.timed = orig
        sys.modules["time"] = real_time
    assert g.check() == []


class _FakeDynamo(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stands in for torch._dynamo where torch has none (torch < 2.0): importing it wraps
    torch.manual_seed, as the real module's import does."""

    def find_spec(self, name, path, target=None):
        if name == "torch._dynamo":
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        real = torch.manual_seed
        torch.manual_seed = functools.wraps(real)(lambda seed: real(seed))


def test_torch_compile_machinery_is_not_tampering():
    # torch.compile imports torch._dynamo on first use, and that import replaces torch.manual_seed
    # for the whole process: the candidate worker loads it before the guard's snapshot, so a
    # candidate (or a compile-mode baseline) that calls torch.compile is not flagged.
    fresh = "torch._dynamo" not in sys.modules
    fake = None
    if importlib.util.find_spec("torch._dynamo") is None:
        fake = _FakeDynamo()
        sys.meta_path.insert(0, fake)
    orig_seed = torch.manual_seed
    try:
        w = worker.Worker("candidate", chan=None)
        w.op_hello({"settings": {"device": "cpu"}}, 1)
        importlib.import_module("torch._dynamo")  # what torch.compile does on first use

        assert w.tampered() == []
        if fresh:
            assert torch.manual_seed is not orig_seed, "the import did not wrap manual_seed: the test proves nothing"
        torch.manual_seed = lambda seed: None  # a real patch after the snapshot still shows
        assert "torch.manual_seed replaced" in w.tampered()
    finally:
        torch.manual_seed = orig_seed
        if fake is not None:
            sys.meta_path.remove(fake)
            sys.modules.pop("torch._dynamo", None)
