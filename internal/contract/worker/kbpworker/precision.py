"""Measured precision: how far a candidate's float32 output is from the exact result.

Runs in the reference process (trusted). The task's model is copied and run in float64 on the
same inputs; the candidate's output and the task's own float32 output are both measured against
that: the normwise relative error ||out - exact|| / ||exact|| over every float32 output. A
candidate computing in fp16, bf16 or TF32 (a 10-bit mantissa or less) lands near 2^-12 whatever
the task; float32 arithmetic, even summed in another order, stays orders of magnitude below. The
driver decides the flag (precision_downcast); this module only measures.
"""

import copy

import torch

from . import compare, inputs

# On the CPU, float64 copies of inputs and outputs above this many elements are not made (on a GPU
# the free memory decides): the measurement is evidence, and must not make a task that fits the
# device run out of memory or time.
MAX_ELEMENTS = 1 << 27
CHUNK = 1 << 23

_isinstance = isinstance
_Tensor = torch.Tensor


class Skipped(Exception):
    """The measurement does not apply or does not fit; the message says why."""


def _float64(v):
    if _isinstance(v, _Tensor) and v.is_floating_point():
        return v.double()
    return v


def _numel(leaves):
    return sum(t.numel() for t in leaves if _isinstance(t, _Tensor))


def _sums(out, exact):
    """Sum of squared differences (out - exact) and of exact^2, in float64, chunk by chunk,
    over the positions where the exact value is finite."""
    a = out.reshape(-1)
    b = exact.reshape(-1)
    diff2 = norm2 = 0.0
    for i in range(0, a.numel(), CHUNK):
        x = a[i:i + CHUNK].double()
        y = b[i:i + CHUNK]
        ok = torch.isfinite(y) & torch.isfinite(x)
        d = torch.where(ok, x - y, torch.zeros_like(y))
        diff2 += float((d * d).sum())
        yy = torch.where(ok, y, torch.zeros_like(y))
        norm2 += float((yy * yy).sum())
    return diff2, norm2


def measure(model, task, seed, dist, device, cand_leaves, ref_leaves):
    """Return {"dtype", "candidate_error", "reference_error", "elements"} for the float32 leaves,
    or raise Skipped."""
    pairs = [i for i, (c, r) in enumerate(zip(cand_leaves, ref_leaves))
             if _isinstance(c, _Tensor) and _isinstance(r, _Tensor) and r.dtype == torch.float32
             and c.dtype == torch.float32 and c.shape == r.shape]
    if not pairs:
        raise Skipped("no float32 output")
    args = inputs.make_inputs(task, seed, dist, device)
    n = _numel(args) + _numel(ref_leaves)
    if device.type == "cuda":
        # float64 copies of the inputs, the weights and the outputs, and as much again for the
        # forward's temporaries, in what is free (the caller returns it to the device afterwards
        # and reports its peak apart from the evaluation's).
        free, _ = torch.cuda.mem_get_info(device)
        free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        params = sum(p.numel() for p in model.parameters()) if hasattr(model, "parameters") else 0
        need = 8 * (2 * n + 2 * params) + (256 << 20)
        if free < need:
            raise Skipped("needs ~%d MiB of free device memory, %d MiB free" % (need >> 20, free >> 20))
    elif n > MAX_ELEMENTS:
        raise Skipped("inputs and outputs hold %d elements (a float64 copy is made below %d)" % (n, MAX_ELEMENTS))
    try:
        m64 = copy.deepcopy(model)
        if hasattr(m64, "double"):
            m64 = m64.double()
        args64 = list(args)
        del args
        for i in range(len(args64)):
            args64[i] = _float64(args64[i])  # the float32 copy goes as its float64 one is made
        with torch.no_grad():
            out64 = m64(*args64)
        del args64, m64
        _, exact = compare.flatten(out64)
        del out64
    except Exception as e:  # a model that cannot run in float64 says nothing about the candidate
        raise Skipped("the task's model does not run in float64: %s: %s" % (type(e).__name__, str(e)[:200]))
    cd = rd = nn = 0.0
    count = 0
    for i in pairs:
        if i >= len(exact) or not _isinstance(exact[i], _Tensor) or exact[i].shape != ref_leaves[i].shape:
            raise Skipped("the float64 model's outputs differ in structure")
        ex = exact[i]
        if ex.dtype != torch.float64:
            raise Skipped("the task's model computes output %d in %s whatever its inputs" % (i, ex.dtype))
        d, norm = _sums(cand_leaves[i], ex)
        r, _ = _sums(ref_leaves[i], ex)
        cd, rd, nn = cd + d, rd + r, nn + norm
        count += ex.numel()
    if nn <= 0.0:
        raise Skipped("the exact output is zero")
    return {"dtype": "float32", "candidate_error": (cd / nn) ** 0.5, "reference_error": (rd / nn) ** 0.5,
            "elements": count}
