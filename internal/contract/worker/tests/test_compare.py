import math

import pytest
import torch

from kbpworker import compare


def test_identical_passes():
    ref = torch.randn(32, 64)
    r = compare.compare_tensor(ref.clone(), ref)
    assert r["ok"], r


def test_dtype_and_shape_mismatch():
    ref = torch.randn(4, 4)
    assert compare.compare_tensor(ref.double(), ref)["kind"] == "dtype"
    assert compare.compare_tensor(ref.reshape(16), ref)["kind"] == "shape"


def test_tolerance_is_dtype_aware():
    ref = torch.ones(100)
    assert compare.compare_tensor(ref + 5e-5, ref)["ok"]  # within 1e-4 + 1e-4*1
    assert not compare.compare_tensor(ref + 5e-4, ref)["ok"]
    h = torch.ones(100, dtype=torch.bfloat16)
    assert compare.compare_tensor(h * 1.0078125, h)["ok"]  # one bf16 ulp at 1.0, within 1e-2
    assert compare.compare_tensor(ref + 5e-4, ref, {"atol": 1e-3, "rtol": 0})["ok"]


def test_nan_and_inf_are_never_wildcards():
    ref = torch.tensor([1.0, float("nan"), float("inf"), 2.0])
    same = ref.clone()
    assert compare.compare_tensor(same, ref)["ok"]
    out = torch.tensor([1.0, 0.0, float("inf"), 2.0])
    assert not compare.compare_tensor(out, ref)["ok"]
    out = torch.tensor([1.0, float("nan"), float("-inf"), 2.0])
    assert not compare.compare_tensor(out, ref)["ok"]
    out = torch.tensor([float("nan"), float("nan"), float("inf"), 2.0])
    r = compare.compare_tensor(out, torch.tensor([1.0, float("nan"), float("inf"), 2.0]))
    assert not r["ok"] and r["first_wrong_index"] == [0] and r["out_nonfinite"] == 3


def test_integers_exact():
    ref = torch.arange(10)
    assert compare.compare_tensor(ref.clone(), ref)["ok"]
    out = ref.clone()
    out[3] += 1
    r = compare.compare_tensor(out, ref)
    assert not r["ok"] and r["wrong"] == 1 and r["first_wrong_index"] == [3]


def test_error_statistics():
    ref = torch.zeros(10, 10)
    out = ref.clone()
    out[2, 3] = 0.5
    out[7, 1] = -2.0
    r = compare.compare_tensor(out, ref)
    assert r["wrong"] == 2 and r["total"] == 100
    assert r["max_abs_err"] == pytest.approx(2.0)
    assert r["mean_abs_err"] == pytest.approx(2.5 / 100)
    assert r["first_wrong_index"] == [2, 3]
    assert math.isclose(r["wrong_fraction"], 0.02)


@pytest.mark.parametrize(
    "damage,kind",
    [
        (lambda o: o[5].add_(1), "rows"),
        (lambda o: o[:, 7].add_(1), "cols"),
        (lambda o: o[:, 250:].add_(1), "col_tail"),
        (lambda o: o[60:].add_(1), "row_tail"),
        (lambda o: o[:, 31::32].add_(1), "tile_edges"),
        (lambda o: o.add_(1), "everywhere"),
    ],
)
def test_patterns(damage, kind):
    ref = torch.randn(64, 256)
    out = ref.clone()
    damage(out)
    r = compare.compare_tensor(out, ref)
    assert not r["ok"]
    assert r["pattern"]["kind"] == kind, r["pattern"]
    assert r["message"]


def test_scattered_pattern():
    torch.manual_seed(0)
    ref = torch.randn(64, 256)
    out = ref.clone()
    mask = torch.rand(64, 256) < 0.3
    out[mask] += 1
    assert compare.compare_tensor(out, ref)["pattern"]["kind"] == "scattered"


def test_strides_policy():
    ref = torch.randn(8, 16)
    out_t = ref.t().contiguous().t()  # same values, column-major
    assert compare.compare_tensor(out_t, ref)["ok"]
    assert compare.compare_tensor(out_t, ref, strides="exact")["kind"] == "strides"
    assert compare.compare_tensor(out_t, ref, strides="contiguous")["kind"] == "strides"


def test_structure():
    a = torch.randn(3)
    sig, leaves = compare.flatten((a, [a, 2.0]))
    assert sig == "(T,(T,S))" and len(leaves) == 3
    r = compare.compare_leaves("(T,T)", [a, a], "(T,(T,S))", leaves)
    assert not r["ok"] and r["kind"] == "structure"
    with pytest.raises(TypeError):
        compare.flatten({"a": a})


def test_overflowing_error_statistics_still_travel_as_json():
    # A garbage output (huge finite values over a zero reference) makes the relative error
    # overflow float32. The comparison must still produce a reply the channel can send.
    import json

    from kbpworker import channel

    ref = torch.zeros(8)
    out = torch.full((8,), 3e38)
    out[0] = -3e38
    r = compare.compare_tensor(out, ref)
    assert not r["ok"] and math.isinf(r["max_rel_err"])
    wire = json.loads(json.dumps(channel.jsonable(r), allow_nan=False))
    assert wire["max_rel_err"] == "inf" and wire["wrong"] == 8
    assert "inf" in r["message"]
    assert channel.jsonable({"a": [float("nan"), float("-inf"), 1.5, (2.0,)]}) == {"a": ["nan", "-inf", 1.5, [2.0]]}


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_chunked_comparison_matches_whole(monkeypatch, layout):
    torch.manual_seed(0)
    ref = torch.randn(40, 24)
    out = ref.clone()
    out[5, 3] += 1.0
    out[17, 20] = float("nan")
    out[30:, 22:] -= 0.5
    if layout == "transposed":
        out = out.t().contiguous().t()  # same values, column-major strides
    whole = compare.compare_tensor(out, ref)
    monkeypatch.setattr(compare, "CHUNK", 7)  # chunks that split rows
    chunked = compare.compare_tensor(out, ref)
    assert not chunked["ok"]
    for key in ("wrong", "first_wrong_index", "max_abs_err", "out_nonfinite", "out_nan", "pattern"):
        assert chunked[key] == whole[key], key
    assert chunked["mean_abs_err"] == pytest.approx(whole["mean_abs_err"])
    assert chunked["first_wrong_index"] == [5, 3]


def test_chunked_integers_and_complex(monkeypatch):
    monkeypatch.setattr(compare, "CHUNK", 5)
    ref = torch.arange(60, dtype=torch.int32).reshape(6, 10)
    out = ref.clone()
    out[4, 9] = 0
    r = compare.compare_tensor(out, ref)
    assert not r["ok"] and r["wrong"] == 1 and r["first_wrong_index"] == [4, 9] and r["max_abs_err"] == 49
    c = torch.randn(8, 8, dtype=torch.complex64)
    bad = c.clone()
    bad[7, 1] += 1j
    r = compare.compare_tensor(bad, c)
    assert not r["ok"] and r["wrong"] == 1 and r["first_wrong_index"] == [7, 1]
    assert compare.compare_tensor(c.clone(), c)["ok"]


def test_digest_sees_any_change():
    t = torch.randn(1000)
    d = compare.digest(t)
    assert compare.digest(t.clone()) == d
    for i in (0, 1, 2, 999):
        u = t.clone()
        u[i] += 1.0
        assert compare.digest(u) != d, i
    assert compare.digest(torch.ones(3, dtype=torch.float16)) != compare.digest(torch.zeros(3, dtype=torch.float16))


def test_finite_path_gives_the_general_paths_bits():
    # The finite fast path must reach exactly the general path's verdicts and errors, including
    # elements right at the tolerance's edge and in float64, half and bfloat16.
    from kbpworker.compare import _finite_chunk, _general_chunk, tolerance_for
    g = torch.Generator().manual_seed(3)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        b = torch.randn(4096, generator=g, dtype=torch.float64).to(dtype)
        atol, rtol = tolerance_for(dtype, None)
        noise = torch.randn(4096, generator=g, dtype=torch.float64) * (atol + rtol * b.double().abs()) * 1.2
        a = (b.double() + noise).to(dtype)
        a[:8] = b[:8]  # exact
        work = torch.float64 if dtype == torch.float64 else torch.float32
        fa, fb = a.to(work), b.to(work)
        fast = _finite_chunk(fa, fb, atol, rtol)
        slow = _general_chunk(fa, fb, atol, rtol, False)
        assert fast is not None
        assert 0 < int(fast[0].sum()) < 4096, "the data should straddle the tolerance"
        assert torch.equal(fast[0], slow[0]), dtype
        assert torch.equal(fast[1], slow[1]) and torch.equal(fast[2], slow[2]), dtype
        assert bool(slow[3].all()) and int(slow[4]) == int(slow[5]) == int(slow[6]) == 0


def test_finite_path_steps_aside_for_nonfinite_and_overflow():
    from kbpworker.compare import _finite_chunk
    big = torch.tensor([3e38, 1.0])
    assert _finite_chunk(big, -big, 1e-5, 1e-5) is None  # |a - b| overflows to inf
    assert _finite_chunk(torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0]), 1e-5, 1e-5) is None
    assert _finite_chunk(torch.tensor([1.0]), torch.tensor([float("inf")]), 1e-5, 1e-5) is None
    res = compare.compare_tensor(torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0]))
    assert res["ok"] and res["out_nan"] == 1


def test_digest_wraps_without_losing_changes():
    # Word sums far beyond 2^31 wrap (int32 sums read in place); the digest still sees a change.
    t = torch.full((1 << 20,), 2 ** 30, dtype=torch.int32)
    d = compare.digest(t)
    assert compare.digest(t.clone()) == d
    u = t.clone()
    u[12345] += 1
    assert compare.digest(u) != d
    # Bytes whose count is not a multiple of 4 are summed without wrapping at 256.
    b = torch.full((1001,), 255, dtype=torch.uint8)
    assert compare.digest(b)[0] == 255 * 1001


def test_finite_chunk_statistics_match_the_general_path():
    g = torch.Generator().manual_seed(5)
    ref = torch.randn(300, 200, generator=g)
    out = ref + torch.randn(300, 200, generator=g) * 1e-6
    out[7, 9] += 1.0  # one clearly wrong element
    fast = compare.compare_tensor(out, ref)
    withnan = ref.clone()
    withnan[0, 0] = float("nan")
    out2 = out.clone()
    out2[0, 0] = float("nan")  # the same NaN on both sides sends the chunk down the general path
    slow = compare.compare_tensor(out2, withnan)
    assert not fast["ok"] and fast["wrong"] == slow["wrong"] == 1 and fast["first_wrong_index"] == [7, 9]
    assert fast["max_abs_err"] == pytest.approx(slow["max_abs_err"], rel=1e-6)
    assert fast["mean_abs_err"] == pytest.approx(slow["mean_abs_err"], rel=1e-3)
    assert fast["max_rel_err"] == pytest.approx(slow["max_rel_err"], rel=1e-6)


def test_same_bytes_compares_bytes_a_chunk_at_a_time(monkeypatch):
    monkeypatch.setattr(compare, "CHUNK", 64)  # many chunks, the last one partial
    for t in (torch.randn(37, 11), torch.randn(11, 37).t(), torch.tensor(1.5), torch.arange(7, dtype=torch.int8),
              torch.rand(50) > 0.5, torch.randn(9, dtype=torch.complex64), torch.randn(33, dtype=torch.float16),
              torch.randn(100)[3:], torch.empty(0)):
        assert compare.same_bytes(t, t.clone()), t
        if t.numel():
            u = t.clone()
            last = tuple(n - 1 for n in u.shape)
            u[last] = (not bool(u[last])) if t.dtype == torch.bool else u[last] + 1
            if not torch.equal(u, t):
                assert not compare.same_bytes(u, t), t
    nan = torch.tensor([float("nan"), 1.0])
    assert compare.same_bytes(nan, nan.clone())  # torch.equal says False: NaN != NaN
    assert not compare.same_bytes(torch.tensor([0.0]), torch.tensor([-0.0]))
    assert not compare.same_bytes(torch.zeros(2, 3), torch.zeros(3, 2))
    assert not compare.same_bytes(torch.zeros(3), torch.zeros(3, dtype=torch.float64))
