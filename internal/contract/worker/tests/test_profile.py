import math
import types

import torch

from kbpworker import profile


def test_extension_calls_are_counted_through_aliases_and_getattr():
    # math's functions are builtins like a pybind11 extension's: the hook sees them by module.
    alias = math.sqrt
    indirect = getattr(math, "floor")

    def forward():
        return alias(4.0) + indirect(2.5) + abs(-1)

    with profile.ExtensionCalls(["math"]) as ext:
        forward()
    assert ext.calls["math.sqrt"][0] == 1
    assert ext.calls["math.floor"][0] == 1
    assert not any(name.startswith("builtins") for name in ext.calls)


def test_extension_calls_see_nothing_when_no_extension_function_runs():
    with profile.ExtensionCalls(["math"]) as ext:
        torch.relu(torch.ones(3))
    assert ext.calls == {}


def test_extension_calls_restore_the_previous_hook():
    import sys

    seen = []
    prev = lambda frame, event, arg: seen.append(event)  # noqa: E731
    sys.setprofile(prev)
    try:
        with profile.ExtensionCalls(["math"]):
            math.sqrt(1.0)
        assert sys.getprofile() is prev
    finally:
        sys.setprofile(None)


def test_profiled_call_on_the_cpu_records_aten_ops_and_extension_calls():
    x = torch.randn(64, 64)

    def call():
        math.sqrt(2.0)
        return torch.relu(x @ x)

    out, ev = profile.profiled_call(call, "cpu", ["math"])
    assert torch.equal(out, torch.relu(x @ x))
    names = {r["name"] for r in ev["rows"]}
    assert "aten::relu" in names or "aten::clamp_min" in names
    assert all(r["kind"] == "op" for r in ev["rows"])
    assert [c["name"] for c in ev["ext_calls"]] == ["math.sqrt"]
    assert ev["wall_us"] > 0 and "error" not in ev


def test_profiled_call_reraises_the_candidates_exception():
    def call():
        raise ValueError("boom")

    try:
        profile.profiled_call(call, "cpu", [])
    except ValueError as e:
        assert str(e) == "boom"
    else:
        raise AssertionError("the exception was swallowed")


class _Range:
    def __init__(self, us):
        self.us = us

    def elapsed_us(self):
        return self.us


def _event(name, device, us):
    return types.SimpleNamespace(name=name, device_type=device, time_range=_Range(us), self_cpu_time_total=us)


def test_summarize_on_a_gpu_keeps_device_activity_and_counts_launches():
    cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU
    events = [
        _event("relu_kernel(float const*, float*, long)", cuda, 10.0),
        _event("relu_kernel(float const*, float*, long)", cuda, 12.0),
        _event("Memcpy DtoD (Device -> Device)", cuda, 3.0),
        _event("cudaLaunchKernel", cpu, 1.0),
        _event("cudaLaunchKernel", cpu, 1.0),
        _event("aten::relu", cpu, 5.0),
    ]
    rows, launches = profile.summarize(events, "cuda")
    assert launches == 2
    assert rows[0] == {"name": "relu_kernel(float const*, float*, long)", "calls": 2, "us": 22.0, "kind": "kernel"}
    assert rows[1]["kind"] == "memcpy"
    assert len(rows) == 2


def test_summarize_bounds_rows_and_names():
    cuda = torch.autograd.DeviceType.CUDA
    events = [_event("k%d" % i + "x" * 5000, cuda, float(i)) for i in range(profile.MAX_ROWS + 50)]
    rows, _ = profile.summarize(events, "cuda")
    assert len(rows) == profile.MAX_ROWS
    assert all(len(r["name"]) <= profile.MAX_NAME for r in rows)
    assert rows[0]["us"] == float(profile.MAX_ROWS + 49)
