import torch

from kbpworker import compare, sensitivity


def test_sample_keeps_small_outputs_whole():
    t = torch.randn(7, 9)
    s = sensitivity.sample_tensor(t)
    assert torch.equal(s, t) and s.data_ptr() != t.data_ptr()


def test_sample_takes_the_same_positions_of_any_layout():
    n = sensitivity.SAMPLE * 3 + 5
    a = torch.arange(n, dtype=torch.float32).reshape(-1, 1)
    sa = sensitivity.sample_tensor(a)
    assert sa.numel() == sensitivity.SAMPLE and torch.equal(sa, sensitivity.sample_tensor(a.clone()))
    assert sa.unique().numel() > sensitivity.SAMPLE // 2  # positions spread, not one repeated
    # A non-contiguous view is gathered by position (never copied whole): the same elements as
    # its contiguous copy.
    c = torch.arange(4 * n, dtype=torch.float32).reshape(n, 4)[:, 1]
    assert not c.is_contiguous()
    sc = sensitivity.sample_tensor(c)
    assert torch.equal(sc, sensitivity.sample_tensor(c.contiguous()))


def _samples(*outs):
    return [sensitivity.sample(compare.flatten(o)) for o in outs]


def test_a_constant_passes_outputs_within_twice_the_tolerance_of_each_other():
    ones = torch.ones(100)
    # 1 and 1 + 3e-4 differ beyond fp32's 1e-4 + 1e-4 |ref| (2e-4 at 1.0), pairwise; their middle
    # is within it of both, so a constant passes both trials.
    assert sensitivity.constant_passes(_samples(ones, ones + 3e-4), None)
    assert not sensitivity.constant_passes(_samples(ones, ones + 5e-4), None)
    assert sensitivity.constant_passes(_samples(ones, ones + 5e-4), {"atol": 1e-3, "rtol": 0})
    # One position where no constant fits is enough.
    spread = ones.clone()
    spread[37] += 1.0
    assert not sensitivity.constant_passes(_samples(ones, ones + 1e-4, spread), None)
    # Exact dtypes, structure, non-finite values.
    assert not sensitivity.constant_passes(_samples(torch.arange(4), torch.arange(4) + 1), None)
    assert sensitivity.constant_passes(_samples(torch.arange(4), torch.arange(4)), None)
    assert not sensitivity.constant_passes(_samples(ones, (ones, ones)), None)
    nan = torch.tensor([1.0, float("nan")])
    assert sensitivity.constant_passes(_samples(nan, nan.clone()), None)
    assert not sensitivity.constant_passes(_samples(nan, torch.tensor([1.0, 2.0])), None)
    half = torch.ones(64, dtype=torch.bfloat16)
    assert sensitivity.constant_passes(_samples(half, half * 1.0078125), None)


def test_finite():
    assert sensitivity.finite(compare.flatten((torch.ones(3), 2.0, 4)))
    assert not sensitivity.finite(compare.flatten((torch.tensor([1.0, float("inf")]),)))
    assert not sensitivity.finite(compare.flatten((torch.ones(3), float("nan"))))


class _FakeReference:
    """reference(seed, dist): outputs from a function of (seed, dist), sampled as the session
    samples them; records what it computed."""

    def __init__(self, samples, fn):
        self.samples, self.fn, self.calls = samples, fn, []

    def __call__(self, seed, dist):
        self.calls.append((seed, dist))
        value = compare.flatten(self.fn(seed, dist))
        self.samples.put((seed, dist), value)
        return value, 1.5


def _run(fn, trials, tol=None):
    samples = sensitivity.Samples()
    ref = _FakeReference(samples, fn)
    for key in trials:
        ref(*key)
    ref.calls = []
    return sensitivity.check(samples, ref, trials, 99, tol), ref.calls


TRIALS = [(1, "default"), (2, "default"), (3, "scaled"), (4, "scaled")]


def test_outputs_that_differ_need_nothing_more():
    rep, calls = _run(lambda seed, dist: torch.full((4,), float(seed)), TRIALS)
    assert rep["varies"] and rep["dist"] == "" and calls == []


def test_a_constant_output_gets_the_first_distribution_that_changes_it():
    def fn(seed, dist):
        # Barely changes under default and scaled (within 1e-4), as a large zero-mean reduction;
        # offset gives a non-finite output; positive changes it.
        if dist == "offset":
            return torch.tensor([float("nan")])
        if dist == "positive":
            return torch.tensor([0.64])
        return torch.tensor([seed * 1e-6])

    rep, calls = _run(fn, TRIALS)
    assert not rep["varies"] and rep["dist"] == "positive", rep
    assert [p["dist"] for p in rep["probed"]] == ["offset", "positive"]
    assert rep["probed"][0] == {"dist": "offset", "finite": False, "differs": False}
    assert rep["probed"][1]["differs"] and rep["ref_call_ms"] == 3.0
    assert calls == [(99, "offset"), (99, "positive")]  # probes at the driver's seed; chosen last


def test_a_truly_constant_output_gets_no_distribution():
    rep, calls = _run(lambda seed, dist: torch.zeros(3), TRIALS)
    assert not rep["varies"] and rep["dist"] == ""
    assert [p["dist"] for p in rep["probed"]] == list(sensitivity.PROBE_ORDER)
    assert not any(p["differs"] for p in rep["probed"])


def test_distributions_of_the_trials_are_not_probed_again():
    trials = [(1, "default"), (2, "offset")]
    rep, calls = _run(lambda seed, dist: torch.zeros(3) if dist != "uniform" else torch.ones(3), trials)
    assert rep["dist"] == "uniform" and [c[1] for c in calls] == ["positive", "uniform"]


def test_a_dropped_sample_is_recomputed():
    samples = sensitivity.Samples()
    ref = _FakeReference(samples, lambda seed, dist: torch.full((2,), float(seed)))
    for i in range(sensitivity.KEPT + 2):
        ref(i, "default")
    assert samples.get((0, "default")) is None and samples.get((sensitivity.KEPT + 1, "default")) is not None
    ref.calls = []
    rep = sensitivity.check(samples, ref, [(0, "default"), (1, "default")], 99, None)
    assert rep["varies"] and ref.calls == [(0, "default"), (1, "default")]


def _outside_random_positions(n, count):
    taken = set(sensitivity._random_positions(n, torch.device("cpu")).tolist())
    return [p for p in range(n) if p not in taken][:count]


def test_rare_large_elements_are_found_where_random_positions_miss_them():
    # A softmax over a very wide row: every value within atol of zero but a few large ones, at
    # positions that change with the seed. Random positions miss them; the first output's largest
    # magnitudes do not.
    n = sensitivity.SAMPLE * 4
    spots = _outside_random_positions(n, 40)

    def fn(seed, dist):
        out = torch.full((n // 4, 4), 1e-6)
        out.view(-1)[spots[seed * 3:seed * 3 + 3]] = 0.5
        return out

    rep, calls = _run(fn, TRIALS)
    assert rep["varies"], rep
    # The first trial computed again (its largest magnitudes), then the second to compare there.
    assert calls == [TRIALS[0], TRIALS[1]]


def test_a_large_constant_output_is_checked_at_its_largest_magnitudes_then_probed():
    n = sensitivity.SAMPLE * 2
    rep, calls = _run(lambda seed, dist: torch.zeros(n) if dist != "sparse" else torch.ones(n), TRIALS)
    assert not rep["varies"] and rep["dist"] == "sparse"
    assert calls == TRIALS + [(99, "offset"), (99, "positive"), (99, "uniform"), (99, "sparse")]


def test_positions_add_the_largest_magnitudes_in_chunks(monkeypatch):
    monkeypatch.setattr(sensitivity, "CHUNK", 1000)  # many chunks
    n = sensitivity.SAMPLE * 2
    t = torch.zeros(n)
    big = [5, 70000, n - 1]
    t[big] = torch.tensor([-3.0, 2.0, 9.0])
    pos = sensitivity.positions(t)
    assert pos.numel() == sensitivity.SAMPLE + sensitivity.TOP
    top = pos[sensitivity.SAMPLE:].tolist()
    assert top[:3] == [n - 1, 5, 70000]
    assert sensitivity.positions(torch.zeros(10)) is None
    assert sensitivity.finite(compare.flatten(t)) and not sensitivity.finite(compare.flatten(t / 0))


def test_a_distribution_the_reference_cannot_run_is_skipped():
    def fn(seed, dist):
        if dist == "offset":
            raise ValueError("needs zero-mean inputs")
        return torch.zeros(3) if dist != "positive" else torch.ones(3)

    rep, calls = _run(fn, TRIALS)
    assert rep["dist"] == "positive"
    assert rep["probed"][0]["dist"] == "offset" and "ValueError: needs zero-mean" in rep["probed"][0]["error"]
