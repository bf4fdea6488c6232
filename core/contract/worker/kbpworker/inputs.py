"""Seeded input generation and the input distributions of the contract.

The reference process and the candidate process generate the same inputs from the same seed
independently, so inputs never have to travel between them.
"""

import contextlib
import math
import random

import torch

try:
    import numpy as _np
except ImportError:  # numpy is optional
    _np = None

DISTRIBUTIONS = ("default", "scaled", "offset", "uniform", "positive", "large", "sparse")


class InputError(Exception):
    pass


def seed_all(seed):
    random.seed(seed)
    if _np is not None:
        _np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def _device_ctx(device):
    # torch >= 2.0: factory functions inside get_inputs() allocate on the device directly, so a
    # multi-GB GPU input is never built on the host first.
    if device.type != "cpu" and hasattr(torch.device, "__enter__"):
        return torch.device(device)
    return contextlib.nullcontext()


def _transform(t, dist, gen):
    if dist == "default":
        return t
    if dist == "scaled":
        u = torch.rand(t.shape, generator=gen, device=t.device, dtype=torch.float32)
        factor = torch.exp((u * 2 - 1) * math.log(4.0))
        return (t.float() * factor).to(t.dtype)
    if dist == "offset":
        c = 1.0 + 2.0 * torch.rand((), generator=gen, device=t.device, dtype=torch.float32).item()
        return (t.float() + c).to(t.dtype)
    if dist == "uniform":
        u = torch.rand(t.shape, generator=gen, device=t.device, dtype=torch.float32)
        return (u * 2 - 1).to(t.dtype)
    if dist == "positive":
        return (t.float().abs() + 1e-3).to(t.dtype)
    if dist == "large":
        return (t.float() * 64.0).to(t.dtype)
    if dist == "sparse":
        keep = torch.rand(t.shape, generator=gen, device=t.device, dtype=torch.float32) < 0.1
        return t * keep.to(t.dtype)
    raise InputError("unknown input distribution %r (known: %s)" % (dist, ", ".join(DISTRIBUTIONS)))


def make_inputs(task, seed, dist, device):
    """Call task.get_inputs() under seed, move tensors to device and apply dist."""
    if dist not in DISTRIBUTIONS:
        raise InputError("unknown input distribution %r (known: %s)" % (dist, ", ".join(DISTRIBUTIONS)))
    seed_all(seed)
    with _device_ctx(device):
        raw = task.get_inputs()
    if not isinstance(raw, (list, tuple)):
        raise InputError("get_inputs() must return a list, got %s" % type(raw).__name__)
    gen = torch.Generator(device=device)
    gen.manual_seed((seed * 2654435761 + 97) % (2**63))
    out = []
    for x in raw:
        if isinstance(x, torch.Tensor):
            x = x.to(device)
            if x.is_floating_point():
                x = _transform(x, dist, gen)
            x = x.contiguous()
        out.append(x)
    return out


def make_init_inputs(task, seed):
    seed_all(seed)
    raw = task.get_init_inputs()
    if not isinstance(raw, (list, tuple)):
        raise InputError("get_init_inputs() must return a list, got %s" % type(raw).__name__)
    return list(raw)
