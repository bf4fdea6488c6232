import types

import pytest
import torch

from kbpworker import precision


class _Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(256, 128)

    def forward(self, x):
        return torch.tanh(self.lin(x))


def _task(model_inputs):
    return types.SimpleNamespace(get_inputs=model_inputs, get_init_inputs=lambda: [])


def _setup():
    task = _task(lambda: [torch.randn(64, 256)])
    model = _Linear()
    x = precision.inputs.make_inputs(task, 7, "default", torch.device("cpu"))
    with torch.no_grad():
        ref = model(*x)
    return task, model, ref


def test_float32_arithmetic_measures_as_float32():
    task, model, ref = _setup()
    m = precision.measure(model, task, 7, "default", torch.device("cpu"), [ref.clone()], [ref])
    assert m["dtype"] == "float32"
    assert m["candidate_error"] == m["reference_error"]
    assert m["candidate_error"] < 2.0 ** -20


def test_half_rounding_measures_near_ten_bits():
    task, model, ref = _setup()
    cand = ref.half().float()
    m = precision.measure(model, task, 7, "default", torch.device("cpu"), [cand], [ref])
    assert 2.0 ** -13 < m["candidate_error"] < 2.0 ** -10
    assert m["candidate_error"] > 100 * m["reference_error"]


def test_non_float32_outputs_are_skipped():
    task, model, ref = _setup()
    with pytest.raises(precision.Skipped):
        precision.measure(model, task, 7, "default", torch.device("cpu"), [ref.double()], [ref.double()])


def test_a_model_that_stays_float32_is_skipped():
    class Stubborn(torch.nn.Module):
        def forward(self, x):
            return x.float() * 2

    task = _task(lambda: [torch.randn(8)])
    x = precision.inputs.make_inputs(task, 1, "default", torch.device("cpu"))
    ref = Stubborn()(*x)
    with pytest.raises(precision.Skipped, match="whatever its inputs"):
        precision.measure(Stubborn(), task, 1, "default", torch.device("cpu"), [ref], [ref])
