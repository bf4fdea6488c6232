"""Seeded input generation and the input distributions of the contract.

The reference process and the candidate process generate the same inputs from the same seed
independently, so inputs never have to travel between them.
"""

import contextlib
import math
import random
import sys

import torch

try:
    import numpy as _np
except ImportError:  # numpy is optional
    _np = None

DISTRIBUTIONS = ("default", "scaled", "offset", "uniform", "positive", "large", "sparse", "negated", "small")

# The distributions probed on every task's reference and, where it stays finite and its output
# changes, tried once in every evaluation beside the task's own (probe.py): most tasks draw their
# inputs with torch.rand, in [0, 1), where an operation that differs on negative inputs (ReLU's max,
# a clamp, abs) is the identity. negated flips every sign, uniform draws from [-1, 1), small takes
# the magnitudes a hundred times down (an epsilon or a threshold that was hard-coded shows there).
SIGN_PROBES = ("negated", "uniform", "small")


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


# Elements transformed at a time: a distribution's temporaries are a few chunks, not a few copies
# of a multi-GB input.
CHUNK = 1 << 24


def _chunk_value(c, u, dist):
    """The new values of one chunk c (as float32), with u its uniform draws (or None)."""
    if dist == "scaled":
        return c * torch.exp((u * 2 - 1) * math.log(4.0))
    if dist == "uniform":
        return u * 2 - 1
    if dist == "positive":
        return c.abs() + 1e-3
    if dist == "large":
        return c * 64.0
    if dist == "negated":
        return -c
    if dist == "small":
        return c * 0.01
    if dist == "sparse":
        return c * (u < 0.1).to(c.dtype)
    raise InputError("unknown input distribution %r (known: %s)" % (dist, ", ".join(DISTRIBUTIONS)))


def _transform_(t, dist, gen):
    """Apply dist to the contiguous floating tensor t in place, one chunk at a time, drawing the
    chunks' random numbers from gen in order (both processes draw the same)."""
    if dist == "default" or t.numel() == 0:
        return
    flat = t.view(-1)
    if dist == "offset":
        c = 1.0 + 2.0 * torch.rand((), generator=gen, device=t.device, dtype=torch.float32).item()
        for i in range(0, flat.numel(), CHUNK):
            part = flat[i:i + CHUNK]
            part.copy_((part.float() + c).to(t.dtype))
        return
    draws = dist in ("scaled", "uniform", "sparse")
    for i in range(0, flat.numel(), CHUNK):
        part = flat[i:i + CHUNK]
        u = torch.rand(part.shape, generator=gen, device=t.device, dtype=torch.float32) if draws else None
        part.copy_(_chunk_value(part.float(), u, dist).to(t.dtype))


def _storage_ptr(x):
    try:
        st = x.untyped_storage() if hasattr(x, "untyped_storage") else x.storage()
        return st.data_ptr()
    except RuntimeError:
        return None


def _refs(seq, i):
    """sys.getrefcount of seq[i], seen from here: every caller's count has the same terms (seq's
    slot, the argument), so counts compare across Python versions, which count them differently."""
    return sys.getrefcount(seq[i])


def _seq_refs(seq):
    return sys.getrefcount(seq)


def _storage_uses(t):
    """How many tensors use t's storage, or None where torch cannot say (torch 1.13)."""
    use = getattr(torch._C, "_storage_Use_Count", None)
    if use is None:
        return None
    try:
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        # The storage object made here holds one use of its own.
        return use(st._cdata) - 1
    except (RuntimeError, AttributeError):
        return None


def _held_elsewhere(raw):
    """For each tensor of raw (what get_inputs returned), whether anything other than raw still
    holds it, or its memory: a module-level tensor returned on every call, a list get_inputs keeps,
    a view of a kept tensor. Such an input is copied before a distribution changes it in place;
    one get_inputs made afresh is changed where it lies, so its bytes are never held twice (the
    counts once took every input for a held one and copied them all, so each distribution's inputs
    held two input-sized blocks at once, in both processes)."""
    probe = [object()]
    if _seq_refs(raw) > _seq_refs(probe) + 1:  # raw is held by the caller's name too
        return [True] * len(raw)
    alone = _refs(probe, 0)
    held = []
    for i in range(len(raw)):
        x = raw[i]
        if not isinstance(x, torch.Tensor):  # not changed in place, nor a buffer
            held.append(False)
            continue
        slots = sum(1 for y in raw if y is x)
        h = _refs(raw, i) - 1 > alone + slots - 1  # x, named here, adds one
        if not h:
            base = getattr(x, "_base", None)  # a view: of what?
            h = base is not None and not any(y is base for y in raw)
        if not h:
            uses = _storage_uses(x)
            if uses is not None:
                sharing = sum(1 for y in raw if isinstance(y, torch.Tensor) and _storage_ptr(y) == _storage_ptr(x)
                              and y is not x) if uses > 1 else 0
                h = uses > 1 + sharing
        held.append(h)
        del x
    return held


def make_inputs(task, seed, dist, device):
    """Call task.get_inputs() under seed, move tensors to device and apply dist (in place: an
    input is transformed where get_inputs put it; inputs that share memory, or that something
    else still holds, are copied first)."""
    if dist not in DISTRIBUTIONS:
        raise InputError("unknown input distribution %r (known: %s)" % (dist, ", ".join(DISTRIBUTIONS)))
    seed_all(seed)
    with _device_ctx(device):
        raw = task.get_inputs()
    if not isinstance(raw, (list, tuple)):
        raise InputError("get_inputs() must return a list, got %s" % type(raw).__name__)
    gen = torch.Generator(device=device)
    gen.manual_seed((seed * 2654435761 + 97) % (2**63))
    held = _held_elsewhere(raw) if dist != "default" else [False] * len(raw)
    out, seen = [], set()
    with torch.no_grad():
        # Copy every input that shares memory with an earlier one before anything is changed in
        # place, so each is transformed exactly once, from get_inputs' values.
        # A tensor something else still holds (a module-level constant) is copied too: changing it
        # in place would change every later call's inputs.
        for x, kept in zip(raw, held):
            if isinstance(x, torch.Tensor):
                y = x.to(device).contiguous()
                if y.is_floating_point() and dist != "default":
                    ptr = _storage_ptr(y)
                    if (y is x and kept) or ptr is None or ptr in seen:
                        y = y.clone()
                    else:
                        seen.add(ptr)
                x = y
            out.append(x)
        del raw
        for x in out:
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                _transform_(x, dist, gen)
    return out


def make_init_inputs(task, seed):
    seed_all(seed)
    raw = task.get_init_inputs()
    if not isinstance(raw, (list, tuple)):
        raise InputError("get_init_inputs() must return a list, got %s" % type(raw).__name__)
    return list(raw)
