"""Tamper detection inside the candidate's process.

Before candidate code is imported, the worker records the identity of every function the harness
relies on (clocks, synchronisation, CUDA events, comparison and RNG functions, the worker's own
modules and classes). After each phase it checks that nothing was replaced. The harness itself
calls the captured objects, so a patch cannot change what the harness measures; the check exists
to report the attempt. Inside one Python process a determined candidate can defeat any check,
which is why the verdict is decided elsewhere and timing is bounded by the driver's own clock.
"""

import builtins
import os
import sys
import threading
import time

import torch

try:
    import torch.profiler as _torch_profiler
except ImportError:  # pragma: no cover - every supported torch has it
    _torch_profiler = None

_TIME = ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns", "sleep")
_TORCH = (
    "allclose", "equal", "isclose", "eq", "manual_seed", "seed", "randn", "rand", "randint",
    "randn_like", "rand_like", "empty", "empty_like", "zeros", "ones", "no_grad", "from_file",
    "isfinite", "isnan", "abs", "max", "sum", "compile",
)
_TENSOR = (
    "clone", "copy_", "data_ptr", "cpu", "numpy", "contiguous", "to", "__eq__", "equal",
    "reshape", "view", "detach", "item", "tolist", "float", "stride", "size", "element_size",
)
_CUDA = (
    "synchronize", "Event", "current_stream", "default_stream", "Stream", "stream",
    "set_stream", "is_available", "get_device_name", "elapsed_time",
)
_CUDA_EVENT = ("record", "elapsed_time", "synchronize", "wait", "query")
_BUILTINS = ("open", "print", "isinstance", "len", "getattr", "setattr")
_OS = ("write", "read", "fdopen", "_exit", "getpid", "kill", "listdir")
_THREADING = ("active_count", "Thread")
_MODULES = ("time", "torch", "os", "builtins", "json")


def _targets():
    yield "time", time, _TIME
    yield "torch", torch, _TORCH
    yield "torch.Tensor", torch.Tensor, _TENSOR
    yield "torch.nn.Module", torch.nn.Module, ("__call__", "_call_impl")
    yield "builtins", builtins, _BUILTINS
    yield "os", os, _OS
    yield "threading", threading, _THREADING
    if hasattr(torch, "testing"):
        yield "torch.testing", torch.testing, ("assert_close",)
    if hasattr(torch, "cuda"):
        yield "torch.cuda", torch.cuda, _CUDA
        yield "torch.cuda.Event", torch.cuda.Event, _CUDA_EVENT
    yield "torch.backends.cudnn", torch.backends.cudnn, ()
    # The runtime evidence (profile.py): the profiler and the interpreter's profile hook.
    yield "sys", sys, ("setprofile", "getprofile")
    if _torch_profiler is not None and hasattr(_torch_profiler, "profile"):
        yield "torch.profiler", _torch_profiler, ("profile",)
        yield "torch.profiler.profile", _torch_profiler.profile, ("__enter__", "__exit__", "start", "stop", "events", "key_averages")


class Guard:
    def __init__(self):
        self._attrs = {}
        self._modules = {}
        self._dicts = {}

    def capture(self, own_modules):
        """Record the current state. own_modules: the worker's modules (their globals and classes)."""
        for label, owner, names in _targets():
            for name in names:
                if hasattr(owner, name):
                    self._attrs[(label, name)] = (owner, getattr(owner, name))
        for name in _MODULES + tuple(m.__name__ for m in own_modules):
            self._modules[name] = sys.modules.get(name)
        for mod in own_modules:
            self._dicts[mod.__name__] = (vars(mod), dict(vars(mod)))
            for k, v in list(vars(mod).items()):
                if isinstance(v, type) and v.__module__ == mod.__name__:
                    self._dicts[mod.__name__ + "." + k] = (vars(v), dict(vars(v)))

    def check(self):
        """Return a sorted list of what changed since capture (empty when nothing did)."""
        changed = []
        for (label, name), (owner, value) in self._attrs.items():
            now = getattr(owner, name, None)
            if now is not value:
                changed.append("%s.%s replaced" % (label, name))
        for name, mod in self._modules.items():
            if sys.modules.get(name) is not mod:
                changed.append("sys.modules[%r] replaced" % name)
        for label, (live, snap) in self._dicts.items():
            for k in set(live) | set(snap):
                if k in ("__doc__", "__weakref__"):
                    continue
                if k not in live:
                    changed.append("%s.%s deleted" % (label, k))
                elif k not in snap:
                    changed.append("%s.%s added" % (label, k))
                elif live[k] is not snap[k]:
                    changed.append("%s.%s replaced" % (label, k))
        return sorted(changed)
