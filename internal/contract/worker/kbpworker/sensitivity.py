"""Can a task's correctness trials tell a constant output from a computed one?

A trial compares the candidate's output with the reference's for one input: within atol +
rtol |ref| at every element. When one fixed output is that close to the reference's outputs for
all of an evaluation's inputs (a loss averaged over a billion elements, a normalised tensor's
mean), a "kernel" that returns it passes every trial without reading its inputs. The reference
keeps a small sample of each output it computes; the driver asks, after the trials, whether such
a constant exists for the samples (constant_passes), and when it does, which other input
distribution gives an output that every such constant fails (PROBE_ORDER). The driver then adds
one trial under it, or flags the result when no distribution does.

Samples make the question cheap: at most SAMPLE random elements of each output, and where those
admit a constant, the TOP largest magnitudes of the first output too, at the same positions for
every output. A position where no constant fits proves that none fits the outputs; positions
that all admit one make it very likely that the outputs do, and the cost of a wrong "likely" is
one added trial."""

import collections
import functools
import math

import torch

from . import compare

SAMPLE = 1 << 16

# The distributions tried, in order, when a constant would pass the trials: offset moves every
# floating input's mean (a zero-mean reduction changes), positive and uniform change its law,
# sparse its density, large its scale (last: it overflows low-precision tasks most often).
PROBE_ORDER = ("offset", "positive", "uniform", "sparse", "large")

# Samples kept per reference process: an evaluation has seeds x distributions trials (10 by
# default) plus its probes.
KEPT = 64


# Positions of the largest magnitudes kept beside the random ones: an output whose variation
# sits in rare large elements (a softmax over 400,000 columns, nearly all its values within atol
# of zero) shows it there, and random positions alone would see it only by luck.
TOP = 4096

# Elements handled at a time when a whole output is scanned: temporaries of a few chunks, never a
# copy of a multi-GB output.
CHUNK = 1 << 24


@functools.lru_cache(maxsize=8)
def _random_positions(n, device):
    """SAMPLE positions in [0, n), the same for every tensor of n elements (random, so that no
    period of the output's layout hides in them; cached: an evaluation's outputs share n)."""
    gen = torch.Generator()
    gen.manual_seed(n)
    return torch.randint(0, n, (SAMPLE,), generator=gen).to(device)


def _flat_chunks(t):
    """(offset, chunk) views of a contiguous t's elements in order."""
    flat = t.reshape(-1)
    for i in range(0, flat.numel(), CHUNK):
        yield i, flat[i:i + CHUNK]


def _top_positions(t, k):
    """The flat positions of t's k largest magnitudes, chunk by chunk (None when t is not a
    contiguous numeric tensor)."""
    if not t.is_contiguous() or t.dtype == torch.bool or t.is_complex():
        return None
    best_val, best_pos = None, None
    for i, c in _flat_chunks(t.detach()):
        mag = c.abs().float()
        v, p = mag.topk(min(k, mag.numel()))
        p = p + i
        if best_val is not None:
            v, p = torch.cat([best_val, v]), torch.cat([best_pos, p])
            v, j = v.topk(min(k, v.numel()))
            p = p[j]
        best_val, best_pos = v, p
        del mag
    return best_pos


def positions(t):
    """Where t is sampled: None (kept whole) for a small t, else random positions and those of its
    largest magnitudes."""
    n = t.numel()
    if n <= SAMPLE:
        return None
    pos = _random_positions(n, t.device)
    top = _top_positions(t, TOP)
    return pos if top is None else torch.cat([pos, top])


def sample_tensor(t, pos=None):
    """A copy of t's elements at pos (flat positions; by default random ones), or of all of them
    when t is small. Gathered by position: t need not be contiguous, and is never copied whole."""
    t = t.detach()
    n = t.numel()
    if n <= SAMPLE:
        return t.clone()
    if pos is None or pos.numel() == 0 or int(pos.max()) >= n:
        pos = _random_positions(n, t.device)
    if t.is_contiguous():
        return t.reshape(-1).index_select(0, pos)
    flat = pos
    index = []
    for size in reversed(t.shape):
        index.append(flat % size)
        flat = flat // size
    return t[tuple(reversed(index))].clone()


def sample(value, where=()):
    """(signature, leaves) of a flattened output, each tensor leaf sampled at where's positions
    for it (random ones where where says nothing)."""
    sig, leaves = value
    where = list(where) + [None] * max(0, len(leaves) - len(where))
    return sig, [sample_tensor(x, p) if isinstance(x, torch.Tensor) else x for x, p in zip(leaves, where)]


def _constant_leaf(leaves, tol):
    """(value, fits): the value at each position that is within tol of every one of leaves (the
    same position's reference values of several outputs), the middle of the intersection of their
    intervals [r - (atol + rtol |r|), r + (atol + rtol |r|)], and whether every position has one.
    Values compared exactly (and NaN, infinities) are the first output's."""
    first = leaves[0]
    if not isinstance(first, torch.Tensor):
        return first, True
    if not first.is_floating_point() or any(not isinstance(x, torch.Tensor) or x.shape != first.shape
                                            or x.dtype != first.dtype for x in leaves):
        return first.clone(), True
    atol, rtol = compare.tolerance_for(first.dtype, tol)
    lo = hi = None
    for x in leaves:
        r = x.double()
        width = r.abs() * rtol + atol
        lo = r - width if lo is None else torch.maximum(lo, r - width)
        hi = r + width if hi is None else torch.minimum(hi, r + width)
    bounded = torch.isfinite(lo) & torch.isfinite(hi)
    if bool((bounded & (lo > hi)).any()):
        return None, False
    return torch.where(bounded, (lo + hi) / 2, first.double()).to(first.dtype), True


def constant_passes(outputs, tol):
    """Whether one fixed output (the same at every call, whatever the inputs) would pass a
    comparison with every one of outputs (samples at the same positions) within tol: then trials
    on their inputs cannot tell a constant from a computation. Decided from the intervals where
    they are disjoint somewhere (the common case, and cheap), else by comparing the constant."""
    sig, leaves = outputs[0]
    if any(o[0] != sig or len(o[1]) != len(leaves) for o in outputs):
        return False
    const = []
    for i in range(len(leaves)):
        value, fits = _constant_leaf([o[1][i] for o in outputs], tol)
        if not fits:
            return False
        const.append(value)
    return all(compare.compare_leaves(sig, const, o[0], o[1], tol)["ok"] for o in outputs)


def finite(value):
    """Whether every floating element of a flattened output is finite (scanned chunk by chunk)."""
    for x in value[1]:
        if isinstance(x, torch.Tensor):
            if not (x.is_floating_point() or x.is_complex()):
                continue
            chunks = _flat_chunks(x.detach()) if x.is_contiguous() else [(0, x)]
            if not all(bool(torch.isfinite(c).all()) for _, c in chunks):
                return False
        elif isinstance(x, float) and not math.isfinite(x):
            return False
    return True


class Samples:
    """Random-position samples of the reference outputs a process computed since its model was
    built, by (seed, dist), oldest dropped first."""

    def __init__(self):
        self._kept = collections.OrderedDict()  # key -> (sample, whether an output leaf was large)

    def clear(self):
        self._kept.clear()

    def put(self, key, value):
        large = any(isinstance(x, torch.Tensor) and x.numel() > SAMPLE for x in value[1])
        self._kept[key] = (sample(value), large)
        self._kept.move_to_end(key)
        while len(self._kept) > KEPT:
            self._kept.popitem(last=False)

    def get(self, key):
        """The sample of key's output, or None."""
        kept = self._kept.get(key)
        return kept[0] if kept else None

    def large(self, key):
        """Whether key's output had a leaf too large to keep whole (its sample is partial)."""
        kept = self._kept.get(key)
        return bool(kept and kept[1])


def check(samples, reference, trials, seed, tol):
    """Whether the reference outputs of trials differ enough that no constant passes them all;
    when they do not, the first distribution of PROBE_ORDER (not among the trials') whose output
    for seed is finite and fails every constant that passes them.

    samples: a Samples; reference(seed, dist) computes (and samples) a reference output and
    returns it with its call's milliseconds; trials: [(seed, dist)]. Returns the reply's fields:
    varies, dist ("" when none), probed (what each probe found) and ref_call_ms (the calls this
    check made)."""
    keys = list(dict.fromkeys(trials))
    ms = 0.0

    def ref(key):
        nonlocal ms
        value, call_ms = reference(*key)
        ms += call_ms
        return value

    def reply(varies, dist="", probed=()):
        return {"varies": varies, "dist": dist, "probed": list(probed), "ref_call_ms": ms}

    if not keys:
        return reply(True)  # no trials: nothing a constant could have passed
    seen = []
    for key in keys:
        if samples.get(key) is None:
            ref(key)  # dropped from the samples, or never computed here
        seen.append(samples.get(key))
    if not constant_passes(seen, tol):
        return reply(True)
    # A constant passing at random positions is not enough for a large output: its variation can
    # sit in rare large elements. Look where the first output's magnitudes are largest too (every
    # output computed again: one is kept at a time), and probe there as well.
    where = ()
    if samples.large(keys[0]):
        value = ref(keys[0])
        where = [positions(x) if isinstance(x, torch.Tensor) else None for x in value[1]]
        seen = [sample(value, where)]
        del value
        for key in keys[1:]:
            seen.append(sample(ref(key), where))
            if not constant_passes(seen, tol):
                return reply(True)
    tried = {dist for _, dist in keys}
    probed = []
    for dist in PROBE_ORDER:
        if dist in tried:
            continue
        entry = {"dist": dist, "finite": False, "differs": False}
        try:
            value = ref((seed, dist))
        except Exception as e:  # a task need not run under every distribution; this one is skipped
            entry["error"] = "%s: %s" % (type(e).__name__, str(e)[:200])
            probed.append(entry)
            continue
        entry["finite"] = finite(value)
        # The distribution changes the output when no constant passes the trials and it too.
        entry["differs"] = entry["finite"] and not constant_passes(seen + [sample(value, where)], tol)
        del value
        probed.append(entry)
        if entry["differs"]:
            return reply(False, dist, probed)
    return reply(False, "", probed)
