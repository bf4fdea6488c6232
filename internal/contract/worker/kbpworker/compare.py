"""Output comparison and mismatch analysis. Runs only in trusted processes.

Tolerance is elementwise |out - ref| <= atol + rtol * |ref|. NaN and Inf are never wildcards: a
position passes only if both sides are NaN there, or both are the same infinity, or both are
finite and close.
"""

import math

import torch

DEFAULT_TOL = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (1e-2, 1e-2),
    torch.complex64: (1e-4, 1e-4),
    torch.complex128: (1e-7, 1e-7),
}
TILES = (128, 64, 32, 16, 8)  # largest first: the most specific description wins


def tolerance_for(dtype, override=None):
    if override:
        return float(override.get("atol")), float(override.get("rtol"))
    if dtype in DEFAULT_TOL:
        return DEFAULT_TOL[dtype]
    return 0.0, 0.0  # integer, bool: exact


def _index(flat, shape):
    idx = []
    for s in reversed(shape):
        idx.append(flat % s if s else 0)
        flat = flat // s if s else 0
    return list(reversed(idx))


def _ranges(values, limit=6):
    """Compress sorted ints into 'a-b' ranges for messages."""
    out = []
    start = prev = None
    for v in values:
        if start is None:
            start = prev = v
        elif v == prev + 1:
            prev = v
        else:
            out.append((start, prev))
            start = prev = v
    if start is not None:
        out.append((start, prev))
    text = ", ".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in out[:limit])
    if len(out) > limit:
        text += ", ..."
    return text


def _pattern(wrong, shape):
    """Describe where the wrong elements sit. wrong: bool tensor of the output's shape."""
    total = wrong.numel()
    n = int(wrong.sum())
    if n == 0:
        return {"kind": "none", "summary": "no wrong elements"}
    if n == total:
        return {"kind": "everywhere", "summary": "every element is wrong"}
    if wrong.dim() == 0:
        return {"kind": "scalar", "summary": "the scalar output is wrong"}
    cols = shape[-1]
    w2 = wrong.reshape(-1, cols)
    rows = w2.shape[0]
    per_row = w2.sum(dim=1)
    per_col = w2.sum(dim=0)
    bad_rows = torch.nonzero(per_row).flatten()
    bad_cols = torch.nonzero(per_col).flatten()
    info = {
        "rows": rows,
        "cols": cols,
        "rows_with_errors": int(bad_rows.numel()),
        "cols_with_errors": int(bad_cols.numel()),
    }
    if cols > 3 and bad_cols.numel() and int(bad_cols.min()) > 0 and cols - int(bad_cols.min()) <= cols // 4:
        c0 = int(bad_cols.min())
        info.update(kind="col_tail", summary="all wrong elements are in the last %d of %d columns (from column %d): a bounds or remainder bug?"
                    % (cols - c0, cols, c0))
        return info
    if rows > 3 and bad_rows.numel() and int(bad_rows.min()) > 0 and rows - int(bad_rows.min()) <= rows // 4:
        r0 = int(bad_rows.min())
        info.update(kind="row_tail", summary="all wrong elements are in the last %d of %d rows (from row %d): a bounds or remainder bug?"
                    % (rows - r0, rows, r0))
        return info
    for t in TILES:
        if cols >= 2 * t and bad_cols.numel() >= 2:
            edge = torch.zeros(cols, dtype=torch.bool, device=wrong.device)
            edge[t - 1::t] = True
            edge[0::t] = True
            on_edge = int(w2[:, edge].sum())
            if on_edge == n and n > 1:
                info.update(kind="tile_edges", tile=t,
                            summary="all wrong elements lie on the edges of %d-wide column tiles" % t)
                return info
        if rows >= 2 * t and bad_rows.numel() >= 2:
            edge = torch.zeros(rows, dtype=torch.bool, device=wrong.device)
            edge[t - 1::t] = True
            edge[0::t] = True
            on_edge = int(w2[edge, :].sum())
            if on_edge == n and n > 1:
                info.update(kind="tile_edges_rows", tile=t,
                            summary="all wrong elements lie on the edges of %d-tall row tiles" % t)
                return info
    full_rows = int((per_row == cols).sum())
    full_cols = int((per_col == rows).sum())
    if rows > 1 and full_rows == bad_rows.numel() and full_rows * cols == n:
        info.update(kind="rows", summary="whole rows are wrong (rows %s of %d)" % (_ranges(bad_rows.tolist()), rows))
        return info
    if cols > 1 and full_cols == bad_cols.numel() and full_cols * rows == n:
        info.update(kind="cols", summary="whole columns are wrong (columns %s of %d)" % (_ranges(bad_cols.tolist()), cols))
        return info
    frac = n / total
    if bad_rows.numel() <= max(1, rows // 20) and rows > 1:
        info.update(kind="few_rows", summary="wrong elements concentrate in %d of %d rows (%s)"
                    % (bad_rows.numel(), rows, _ranges(bad_rows.tolist())))
        return info
    if bad_cols.numel() <= max(1, cols // 20) and cols > 1:
        info.update(kind="few_cols", summary="wrong elements concentrate in %d of %d columns (%s)"
                    % (bad_cols.numel(), cols, _ranges(bad_cols.tolist())))
        return info
    info.update(kind="scattered", summary="%.3g%% of elements are wrong, spread over %d rows and %d columns"
                % (100 * frac, bad_rows.numel(), bad_cols.numel()))
    return info


# Elements per comparison chunk. A chunk's temporaries (a few float32 or bool tensors of this many
# elements, about 1 GiB together) are what the comparison costs beyond the two tensors themselves,
# not a float copy of the whole output (KernelBench's 6.4 GB ReLU output once needed 24 GiB here).
CHUNK = 1 << 25


def _chunks(out, ref):
    """Yield (offset, out_chunk, ref_chunk) as flat views in index order, copying at most one
    chunk at a time (a non-contiguous output is read one slice of its first dimension at a time)."""
    n = ref.numel()
    if out.is_contiguous() and ref.is_contiguous():
        fo, fr = out.reshape(-1), ref.reshape(-1)
        for i in range(0, n, CHUNK):
            yield i, fo[i:i + CHUNK], fr[i:i + CHUNK]
        return
    if ref.dim() == 0 or ref.shape[0] <= 1:
        yield 0, out.contiguous().reshape(-1), ref.contiguous().reshape(-1)
        return
    inner = n // ref.shape[0]
    rows = max(1, CHUNK // max(inner, 1))
    for r in range(0, ref.shape[0], rows):
        yield r * inner, out[r:r + rows].reshape(-1), ref[r:r + rows].reshape(-1)


class _Stats:
    """Running error statistics over the chunks of one comparison, kept on the tensors' device:
    no chunk waits for the device; the totals are read once at the end."""

    def __init__(self, device):
        z = lambda dt: torch.zeros((), dtype=dt, device=device)  # noqa: E731
        self.wrong = z(torch.int64)
        self.both = z(torch.int64)
        self.sum_abs = z(torch.float64)
        self.sum_rel = z(torch.float64)
        self.max_abs = z(torch.float64)
        self.max_rel = z(torch.float64)
        self.out_nonfinite = z(torch.int64)
        self.ref_nonfinite = z(torch.int64)
        self.out_nan = z(torch.int64)

    def fold(self, wrong, diff=None, rel=None, both=None):
        """Add one chunk: its wrong elements and, for floating chunks, the errors where both sides
        are finite (both None with a diff: every element is)."""
        if diff is not None and both is None:
            # Every element finite: no mask to apply, and no reduction here copies the chunk (a
            # sum to a wider dtype first makes a whole copy in that dtype, and a copy of GBs
            # splits the allocator's cached input-sized blocks). Wrong elements are counted only
            # where there are any; the error sums accumulate in the chunk's own dtype (they feed
            # mean errors, which are statistics), across chunks in float64.
            if bool(wrong.any()):
                self.wrong += wrong.sum()
            self.both += diff.numel()
            if diff.numel():
                self.max_abs = torch.maximum(self.max_abs, diff.max().double())
                self.max_rel = torch.maximum(self.max_rel, rel.max().double())
            self.sum_abs += diff.sum().double()
            self.sum_rel += rel.sum().double()
            return
        self.wrong += wrong.sum()
        if diff is not None:
            self.both += both.sum()
            zero = torch.zeros((), dtype=diff.dtype, device=diff.device)
            d = torch.where(both, diff, zero)
            r = torch.where(both, rel, zero)
            if d.numel():
                self.max_abs = torch.maximum(self.max_abs, d.max().double())
                self.max_rel = torch.maximum(self.max_rel, r.max().double())
            self.sum_abs += d.sum(dtype=torch.float64)
            self.sum_rel += r.sum(dtype=torch.float64)


def _float_chunk(o, r, atol, rtol, complex_):
    """Per-element verdicts of one floating chunk, computed in float32 (float64 for float64).

    Returns (wrong, diff, rel, both, out non-finite count, ref non-finite count, out NaN count);
    both is None when every element of both sides is finite."""
    if complex_:
        return _general_chunk(torch.view_as_real(o), torch.view_as_real(r), atol, rtol, True)
    work = torch.float64 if r.dtype == torch.float64 else torch.float32
    a, b = o.to(work), r.to(work)
    return _finite_chunk(a, b, atol, rtol) or _general_chunk(a, b, atol, rtol, False)


def _finite_chunk(a, b, atol, rtol):
    """_float_chunk's answer where every element of both real chunks is finite, else None.

    That is nearly always, and then the verdict needs a third of the general path's passes over
    the data (on the CPU a trial's comparison took 0.40 s of its 0.61 s for a 31 MB output): |a - b|
    is finite exactly when a and b are (or when it overflows, which the general path judges), and
    close means |a - b| <= atol + rtol |b|, computed in the general path's order, so both paths
    give the same bits (tests/test_compare.py holds them to that)."""
    diff = (a - b).abs_()
    # The largest difference is NaN or infinite exactly when some difference is (max propagates
    # NaN): one reduction, without a mask as large as the chunk.
    if not bool(torch.isfinite(diff.max())):
        return None
    bmag = b.abs()
    wrong = diff > bmag.mul(rtol).add_(atol)
    rel = diff / bmag.add_(1e-12)
    zero = torch.zeros((), dtype=torch.int64, device=a.device)
    return wrong, diff, rel, None, zero, zero, zero


def _general_chunk(a, b, atol, rtol, complex_):
    """_float_chunk's answer for any values: NaN and infinities on either side, complex pairs."""
    fa, fb = torch.isfinite(a), torch.isfinite(b)
    both = fa & fb
    diff = torch.where(both, (a - b).abs(), torch.zeros((), dtype=a.dtype, device=a.device))
    close = both & (diff <= atol + rtol * b.abs())
    same_nan = torch.isnan(a) & torch.isnan(b)
    same_inf = torch.isinf(a) & torch.isinf(b) & (torch.sign(a) == torch.sign(b))
    ok = close | same_nan | same_inf
    bmag = b.abs()
    nonfin_a, nonfin_b, nan_a = ~fa, ~fb, torch.isnan(a)
    if complex_:
        ok, both, diff, bmag = ok.all(dim=-1), both.all(dim=-1), diff.amax(dim=-1), bmag.amax(dim=-1)
    rel = diff / (bmag + 1e-12)
    return ~ok, diff, rel, both, nonfin_a.sum(), nonfin_b.sum(), nan_a.sum()


def compare_tensor(out, ref, tol=None, strides="any"):
    """Compare one output tensor with its reference. Returns a dict with ok and details.

    Works chunk by chunk in (at most) float32, so its memory is a few chunks, whatever the
    output's size; the full map of wrong elements is built only when something is wrong, as one
    bool per element, to say where the errors sit."""
    res = {"ok": True, "shape": list(ref.shape), "dtype": str(ref.dtype).replace("torch.", "")}
    if out.dtype != ref.dtype:
        res.update(ok=False, kind="dtype", message="output dtype is %s, expected %s"
                   % (str(out.dtype).replace("torch.", ""), res["dtype"]))
        return res
    if tuple(out.shape) != tuple(ref.shape):
        res.update(ok=False, kind="shape", message="output shape is %s, expected %s"
                   % (list(out.shape), list(ref.shape)))
        return res
    if strides == "exact" and tuple(out.stride()) != tuple(ref.stride()):
        res.update(ok=False, kind="strides", message="output strides are %s, expected %s"
                   % (list(out.stride()), list(ref.stride())))
        return res
    if strides == "contiguous" and not out.is_contiguous():
        res.update(ok=False, kind="strides", message="output is not contiguous (strides %s)" % list(out.stride()))
        return res
    atol, rtol = tolerance_for(ref.dtype, tol)
    res["atol"], res["rtol"] = atol, rtol
    if ref.numel() == 0:
        return res
    floating = ref.is_floating_point() or ref.is_complex()
    st = _Stats(ref.device)
    int_max = None
    for _, o, r in _chunks(out, ref):
        if floating:
            wrong, diff, rel, both, nfa, nfb, nan_a = _float_chunk(o, r, atol, rtol, ref.is_complex())
            st.fold(wrong, diff, rel, both)
            st.out_nonfinite += nfa
            st.ref_nonfinite += nfb
            st.out_nan += nan_a
        else:
            wrong = o != r
            st.fold(wrong)
            if wrong.numel():
                d = torch.where(wrong, (o.to(torch.int64) - r.to(torch.int64)).abs(), torch.zeros((), dtype=torch.int64, device=o.device)).max()
                int_max = d if int_max is None else torch.maximum(int_max, d)
    n_wrong = int(st.wrong)
    if floating:
        nb = int(st.both)
        if nb:
            res["max_abs_err"] = float(st.max_abs)
            res["mean_abs_err"] = float(st.sum_abs) / nb
            res["max_rel_err"] = float(st.max_rel)
            res["mean_rel_err"] = float(st.sum_rel) / nb
        res["out_nonfinite"] = int(st.out_nonfinite)
        res["ref_nonfinite"] = int(st.ref_nonfinite)
        res["out_nan"] = int(st.out_nan)
    elif n_wrong:
        res["max_abs_err"] = float(int_max)
    res["wrong"] = n_wrong
    res["total"] = ref.numel()
    if n_wrong:
        wmap = _wrong_map(out, ref, atol, rtol, floating)
        flat = int(torch.nonzero(wmap.reshape(-1)[:_first_chunk_end(wmap)])[0])
        idx = _index(flat, list(ref.shape))
        res.update(ok=False, kind="values", wrong_fraction=n_wrong / ref.numel(), first_wrong_index=idx,
                   first_wrong_out=_scalar(_element(out, idx)), first_wrong_ref=_scalar(_element(ref, idx)))
        res["pattern"] = _pattern(wmap, list(ref.shape))
        res["message"] = _message(res)
    return res


def same_bytes(a, b):
    """Whether two tensors of one shape and dtype hold the same bytes, element for element (a NaN
    equals itself; -0.0 is not 0.0), read a chunk at a time as the widest integers the bytes
    divide into. torch.equal compares values (NaN differs from itself) and on a GPU first makes a
    bool tensor as large as its inputs (600 MB for KernelBench's 6 GiB ReLU input)."""
    if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    for _, x, y in _chunks(a, b):
        if not torch.equal(*_words(x, y)):
            return False
    return True


def _words(x, y):
    """Two flat tensors' bytes as the widest integers both divide into."""
    x, y = x.contiguous().view(torch.uint8), y.contiguous().view(torch.uint8)
    for wide in (torch.int64, torch.int32):
        try:
            return x.view(wide), y.view(wide)
        except RuntimeError:  # a byte count or offset that is not a multiple of the width
            continue
    return x, y


def _first_chunk_end(wmap):
    """The end of the first chunk of the flat map that holds a wrong element (nonzero over a
    chunk, not over a whole output that may be GBs of bools)."""
    flat = wmap.reshape(-1)
    for i in range(0, flat.numel(), CHUNK):
        if bool(flat[i:i + CHUNK].any()):
            return i + CHUNK
    return flat.numel()


def _element(t, idx):
    return t[tuple(idx)] if idx else t


def _wrong_map(out, ref, atol, rtol, floating):
    """The bool map of wrong elements, in the output's shape, built chunk by chunk."""
    m = torch.empty(ref.numel(), dtype=torch.bool, device=ref.device)
    for off, o, r in _chunks(out, ref):
        if floating:
            w = _float_chunk(o, r, atol, rtol, ref.is_complex())[0]
        else:
            w = o != r
        m[off:off + w.numel()] = w
    return m.view(ref.shape)


def digest(t):
    """A content hash of a tensor's bytes: the sum of its 32-bit words and the sum of every third
    word (each modulo 2^32 per chunk), read in large chunks (two reductions per chunk, no copy of
    the tensor). Equal contents
    give equal digests; output finished after a call returned changes them unless its writer
    crafted the change to cancel out in both sums."""
    if t.numel() == 0:
        return [0, 0]
    flat = t.detach()
    flat = flat.reshape(-1) if flat.is_contiguous() else flat.contiguous().reshape(-1)
    words = flat.view(torch.uint8) if flat.dtype != torch.uint8 else flat
    if words.numel() % 4 == 0:
        words = words.view(torch.int32)
    s1 = torch.zeros((), dtype=torch.int64, device=words.device)
    s2 = torch.zeros((), dtype=torch.int64, device=words.device)
    # 32-bit words are summed as int32, wrapping, which reads them in place: a sum to int64
    # first copies the whole chunk to int64 (twice its bytes, on every timed call). Wrapping
    # sums are still exact sums modulo 2^32. Bytes (a size not a multiple of 4) are summed to
    # int64, whose copy is the price of not wrapping at 256.
    acc = torch.int32 if words.dtype == torch.int32 else torch.int64
    step = 1 << 26
    for i in range(0, words.numel(), step):
        w = words[i:i + step]
        s1 += w.sum(dtype=acc)
        s2 += w[(3 - i % 3) % 3::3].sum(dtype=acc)
    return [int(s1), int(s2)]


def _scalar(x):
    v = x.item()
    if isinstance(v, complex):
        return str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def _message(r):
    parts = ["%d of %d elements (%.3g%%) differ beyond atol=%g rtol=%g" % (
        r["wrong"], r["total"], 100 * r["wrong_fraction"], r["atol"], r["rtol"])]
    if "max_abs_err" in r:
        parts.append("max abs err %.3g, mean abs err %.3g" % (r["max_abs_err"], r.get("mean_abs_err", r["max_abs_err"])))
    if "max_rel_err" in r:
        parts.append("max rel err %.3g" % r["max_rel_err"])
    parts.append("first at index %s: got %s, expected %s" % (r["first_wrong_index"], r["first_wrong_out"], r["first_wrong_ref"]))
    if r.get("out_nonfinite"):
        parts.append("%d non-finite values in the output where the reference has %d" % (r["out_nonfinite"], r.get("ref_nonfinite", 0)))
    parts.append(r["pattern"]["summary"])
    return "; ".join(parts)


def flatten(obj):
    """Flatten a forward() result into (structure signature, leaves)."""
    if isinstance(obj, torch.Tensor):
        return "T", [obj]
    if isinstance(obj, (list, tuple)):
        sig, leaves = [], []
        for x in obj:
            s, l = flatten(x)
            sig.append(s)
            leaves.extend(l)
        return "(" + ",".join(sig) + ")", leaves
    if obj is None or isinstance(obj, (bool, int, float)):
        return "S", [obj]
    raise TypeError("forward() returned a %s; only tensors, tuples/lists of them and Python numbers are supported"
                    % type(obj).__name__)


def compare_leaves(out_sig, out_leaves, ref_sig, ref_leaves, tol=None, strides="any"):
    """Compare flattened outputs. Returns {ok, kind, message, leaves:[...]}."""
    if out_sig != ref_sig or len(out_leaves) != len(ref_leaves):
        return {"ok": False, "kind": "structure",
                "message": "output structure is %s, expected %s" % (out_sig, ref_sig), "leaves": []}
    results = []
    for i, (o, r) in enumerate(zip(out_leaves, ref_leaves)):
        if isinstance(r, torch.Tensor):
            if not isinstance(o, torch.Tensor):
                results.append({"ok": False, "kind": "structure", "message": "output %d is not a tensor" % i})
                continue
            results.append(compare_tensor(o, r, tol, strides))
        else:
            ok = (o == r) if not isinstance(r, float) else (
                isinstance(o, (int, float)) and abs(o - r) <= 1e-6 + 1e-6 * abs(r))
            results.append({"ok": bool(ok), "kind": "value", "message": "" if ok else "output %d is %r, expected %r" % (i, o, r)})
    bad = [(i, r) for i, r in enumerate(results) if not r["ok"]]
    if not bad:
        return {"ok": True, "leaves": results}
    i, first = bad[0]
    prefix = "output %d: " % i if len(results) > 1 else ""
    return {"ok": False, "kind": first.get("kind", "values"), "message": prefix + first.get("message", ""),
            "leaves": results}
