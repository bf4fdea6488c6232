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
