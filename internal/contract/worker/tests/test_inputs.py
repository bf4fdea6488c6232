import types

import pytest
import torch

from kbpworker import inputs


def task(shape=(4, 8)):
    t = types.SimpleNamespace()
    t.get_inputs = lambda: [torch.randn(*shape), torch.randint(0, 5, (shape[0],)), 3]
    t.get_init_inputs = lambda: [shape[1]]
    return t


def test_same_seed_same_inputs():
    cpu = torch.device("cpu")
    a = inputs.make_inputs(task(), 7, "default", cpu)
    b = inputs.make_inputs(task(), 7, "default", cpu)
    c = inputs.make_inputs(task(), 8, "default", cpu)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and a[2] == 3
    assert not torch.equal(a[0], c[0])


@pytest.mark.parametrize("dist", inputs.DISTRIBUTIONS)
def test_distributions_are_deterministic_and_leave_integers(dist):
    cpu = torch.device("cpu")
    a = inputs.make_inputs(task(), 3, dist, cpu)
    b = inputs.make_inputs(task(), 3, dist, cpu)
    base = inputs.make_inputs(task(), 3, "default", cpu)
    assert torch.equal(a[0], b[0])
    assert torch.equal(a[1], base[1])  # integer tensors untouched
    assert torch.isfinite(a[0]).all()


def test_distribution_properties():
    cpu = torch.device("cpu")
    t = task((64, 256))
    base = inputs.make_inputs(t, 1, "default", cpu)[0]
    scaled = inputs.make_inputs(t, 1, "scaled", cpu)[0]
    assert torch.equal(torch.sign(scaled), torch.sign(base))
    ratio = (scaled / base).abs()
    assert ratio.min() >= 0.25 - 1e-6 and ratio.max() <= 4 + 1e-5
    assert inputs.make_inputs(t, 1, "offset", cpu)[0].mean() > 0.9
    assert inputs.make_inputs(t, 1, "positive", cpu)[0].min() > 0
    u = inputs.make_inputs(t, 1, "uniform", cpu)[0]
    assert u.min() >= -1 and u.max() <= 1
    assert torch.allclose(inputs.make_inputs(t, 1, "large", cpu)[0], base * 64)
    assert (inputs.make_inputs(t, 1, "sparse", cpu)[0] == 0).float().mean() > 0.8


def test_unknown_distribution():
    with pytest.raises(inputs.InputError):
        inputs.make_inputs(task(), 1, "gaussian", torch.device("cpu"))


def test_get_inputs_must_return_a_list():
    t = types.SimpleNamespace(get_inputs=lambda: torch.randn(3))
    with pytest.raises(inputs.InputError):
        inputs.make_inputs(t, 1, "default", torch.device("cpu"))


@pytest.mark.parametrize("dist", [d for d in inputs.DISTRIBUTIONS if d != "default"])
def test_chunked_transform_and_aliased_inputs(monkeypatch, dist):
    """Distributions are applied in place, chunk by chunk; an input that shares memory with an
    earlier one is copied first, so each is transformed exactly once."""
    cpu = torch.device("cpu")
    monkeypatch.setattr(inputs, "CHUNK", 5)  # many chunks, one split mid-row
    shared = types.SimpleNamespace()

    def get_inputs():
        x = torch.randn(6, 7)
        return [x, x, x[2:]]

    shared.get_inputs = get_inputs
    a = inputs.make_inputs(shared, 4, dist, cpu)
    b = inputs.make_inputs(shared, 4, dist, cpu)
    for u, v in zip(a, b):
        assert torch.equal(u, v)
    base = inputs.make_inputs(shared, 4, "default", cpu)
    assert a[0].data_ptr() != a[1].data_ptr() and a[0].data_ptr() != a[2].data_ptr()
    if dist == "large":  # deterministic: each input transformed once, from the same values
        for u, v in zip(a, base):
            assert torch.allclose(u, v * 64.0)


def test_module_level_inputs_are_not_changed():
    """An input get_inputs returns from somewhere that keeps it is copied before a distribution
    changes it, so later calls see the same values."""
    cpu = torch.device("cpu")
    fixed = torch.randn(4, 4)
    keep = fixed.clone()
    t = types.SimpleNamespace(get_inputs=lambda: [fixed])
    a = inputs.make_inputs(t, 1, "large", cpu)
    b = inputs.make_inputs(t, 1, "large", cpu)
    assert torch.equal(fixed, keep)
    assert torch.equal(a[0], b[0]) and torch.allclose(a[0], keep * 64.0)


@pytest.mark.parametrize("dist", [d for d in inputs.DISTRIBUTIONS if d != "default"])
def test_fresh_inputs_are_changed_where_they_lie(dist):
    """An input get_inputs made afresh is transformed in place, never copied first: a copy held an
    input-sized block twice in both processes (on a GPU, two inputs' worth of reserved memory for
    tasks whose inputs are most of their footprint)."""
    import weakref

    made = []

    def get_inputs():
        x, y = torch.randn(8, 8), torch.randn(3)
        made[:] = [weakref.ref(x), weakref.ref(y)]
        return (x, y, 2)

    t = types.SimpleNamespace(get_inputs=get_inputs)
    out = inputs.make_inputs(t, 5, dist, torch.device("cpu"))
    assert out[0] is made[0]() and out[1] is made[1]()
    assert torch.equal(out[0], inputs.make_inputs(t, 5, dist, torch.device("cpu"))[0])


@pytest.mark.parametrize("kept", ["list", "view", "twice"])
def test_inputs_something_else_holds_are_copied(kept):
    """A list get_inputs keeps, or a view of a tensor it keeps, is copied before it is changed."""
    cpu = torch.device("cpu")
    fixed = torch.randn(6, 4)
    keep = fixed.clone()
    held = [fixed]
    get = {"list": lambda: held, "view": lambda: [fixed[1:]], "twice": lambda: [fixed, fixed]}[kept]
    t = types.SimpleNamespace(get_inputs=get)
    a = inputs.make_inputs(t, 1, "large", cpu)
    b = inputs.make_inputs(t, 1, "large", cpu)
    assert torch.equal(fixed, keep) and held[0] is fixed
    assert torch.equal(a[0], b[0]) and torch.allclose(a[0], (keep if kept != "view" else keep[1:]) * 64.0)
