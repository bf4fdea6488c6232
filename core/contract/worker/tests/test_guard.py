import sys
import time

import torch

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
