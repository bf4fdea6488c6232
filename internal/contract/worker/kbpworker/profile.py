"""Runtime evidence: what ran during one profiled forward of the candidate.

After a correct candidate has been timed, the driver asks for one more call on trusted inputs,
made under torch.profiler and never timed. This module collects the raw facts of that call: every
device kernel by name with its calls and time (on a GPU), every ATen operator by its own time (on
the CPU), and every call the candidate made into the extension modules it built. It decides
nothing: the driver, which holds the candidate's source, decides which kernels are the
candidate's own and which flags apply. The facts come from the candidate's process, so they are
evidence, not proof (docs/contract.md).
"""

import sys
import time

import torch

try:
    import torch.profiler as _torch_profiler
except ImportError:  # pragma: no cover - every supported torch has it
    _torch_profiler = None

# Captured before any candidate code runs.
_setprofile = sys.setprofile
_getprofile = sys.getprofile
_perf_ns = time.perf_counter_ns
_profile = getattr(_torch_profiler, "profile", None)
_Activity = getattr(_torch_profiler, "ProfilerActivity", None)
_DeviceType = getattr(torch.autograd, "DeviceType", None)

# Bounds on what one reply carries: a candidate can launch any number of distinct kernels.
MAX_ROWS = 200
MAX_NAME = 2000


class ExtensionCalls:
    """Counts and times the candidate's calls of its compiled extension's functions.

    pybind11 functions are builtin functions whose __module__ is the extension's name, so the
    interpreter's profile hook sees every call the candidate's Python code makes into them (the
    'c_call' event), aliases and getattr indirection included. The hook is installed for one call
    only: it slows every Python call down."""

    def __init__(self, modules):
        self.modules = frozenset(modules)
        self.calls = {}  # "module.function" -> [calls, microseconds]
        self._stack = []
        self._prev = None

    def _hook(self, frame, event, arg):
        if event == "c_call":
            mod = getattr(arg, "__module__", None)
            if isinstance(mod, str) and mod in self.modules:
                self._stack.append((arg, mod + "." + str(getattr(arg, "__name__", "?")), _perf_ns()))
        elif event in ("c_return", "c_exception") and self._stack and self._stack[-1][0] is arg:
            _, name, t0 = self._stack.pop()
            row = self.calls.setdefault(name, [0, 0.0])
            row[0] += 1
            row[1] += (_perf_ns() - t0) / 1e3

    def __enter__(self):
        self._prev = _getprofile()
        _setprofile(self._hook)
        return self

    def __exit__(self, *exc):
        _setprofile(self._prev)
        return False


def _rows(table):
    rows = [{"name": name[:MAX_NAME], "calls": int(c), "us": float(us), "kind": kind}
            for (kind, name), (c, us) in table.items()]
    rows.sort(key=lambda r: -r["us"])
    return rows[:MAX_ROWS]


def summarize(events, device_type):
    """Aggregate profiler events by name. On a GPU the rows are device activity (kernels, and
    memcpy/memset as their own kinds); on the CPU they are ATen operators by their own time.
    Returns (rows, launches): launches counts the host-side kernel launch calls, to tell a call
    that launched nothing from a profiler that recorded no device activity."""
    table = {}
    launches = 0
    for e in events:
        name = str(getattr(e, "name", ""))
        dev = getattr(e, "device_type", None)
        on_device = _DeviceType is not None and dev == _DeviceType.CUDA
        if device_type == "cuda":
            if on_device:
                low = name.lower()
                kind = "memcpy" if low.startswith("memcpy") else "memset" if low.startswith("memset") else "kernel"
                us = float(e.time_range.elapsed_us())
            else:
                if "LaunchKernel" in name:
                    launches += 1
                continue
        else:
            if on_device or not name.startswith("aten::"):
                continue
            kind, us = "op", float(getattr(e, "self_cpu_time_total", 0.0))
        row = table.setdefault((kind, name), [0, 0.0])
        row[0] += 1
        row[1] += us
    return _rows(table), launches


def profiled_call(call, device_type, ext_modules):
    """Run call() once under the profiler (and the extension-call hook). Returns (output,
    evidence). An exception of the call itself propagates; a failure of the profiler is reported in
    the evidence and the call's output is still returned."""
    evidence = {"tool": "torch.profiler", "device": device_type, "extensions": sorted(ext_modules)}
    ext = ExtensionCalls(ext_modules)
    prof = None
    if _profile is None or _Activity is None:
        evidence["error"] = "torch.profiler is not available"
    else:
        acts = [_Activity.CPU]
        if device_type == "cuda":
            acts.append(_Activity.CUDA)
        try:
            prof = _profile(activities=acts)
            prof.__enter__()
        except Exception as e:  # the profiler's failure is not the candidate's
            evidence["error"] = "profiler did not start: %s: %s" % (type(e).__name__, e)
            prof = None
    failure = None
    t0 = _perf_ns()
    try:
        with ext:
            out = call()
    except BaseException as e:  # re-raised once the profiler is stopped
        failure = e
    wall_us = (_perf_ns() - t0) / 1e3
    if prof is not None:
        try:
            prof.__exit__(None, None, None)
            events = prof.events()
            evidence["rows"], evidence["launches"] = summarize(events, device_type)
        except Exception as e:
            evidence["error"] = "profiler failed: %s: %s" % (type(e).__name__, e)
    if failure is not None:
        raise failure
    evidence["wall_us"] = wall_us
    evidence["ext_calls"] = [{"name": n, "calls": c, "us": us} for n, (c, us) in sorted(ext.calls.items())]
    return out, evidence
