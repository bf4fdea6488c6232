"""Per-operation accounting (time and memory of each operation, for the record) and the staging
of timed calls' inputs on each side."""
import os

import pytest
import torch

from kbpworker import harness
from kbpworker.__main__ import Worker

TASKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata", "tasks")


class _Chan:
    def __init__(self):
        self.sent = []

    def send(self, body):
        self.sent.append(body)


def _worker(role="reference"):
    w = Worker(role, _Chan())
    w.handle({"op": "hello", "seq": 1, "settings": {"device": "cpu"}})
    assert w.chan.sent[-1]["ok"], w.chan.sent[-1]
    return w


def test_operations_are_accounted_since_the_last_load():
    w = _worker()
    task = os.path.join(TASKS, "scale_relu.py")
    w.handle({"op": "load", "seq": 2, "task_path": task, "init_seed": 1})
    assert w.chan.sent[-1]["ok"], w.chan.sent[-1]
    for seq in (3, 4):
        w.handle({"op": "validate", "seq": seq, "distributions": ["default"], "seeds": [1, 2]})
        assert w.chan.sent[-1]["ok"], w.chan.sent[-1]
    w.handle({"op": "gc", "seq": 5})
    w.handle({"op": "nonsense", "seq": 6})
    w.handle({"op": "memory", "seq": 7})
    ops = w.chan.sent[-1]["memory"]["ops"]
    assert set(ops) == {"load", "validate"}, ops  # gc and memory are the accounting's own; unknown ops are not run
    assert ops["validate"]["calls"] == 2 and ops["load"]["calls"] == 1
    assert ops["validate"]["seconds"] > 0
    # A new load starts the accounting afresh: the record covers one evaluation.
    w.handle({"op": "load", "seq": 8, "task_path": task, "init_seed": 1})
    w.handle({"op": "memory", "seq": 9})
    assert set(w.chan.sent[-1]["memory"]["ops"]) == {"load"}


def test_a_failing_operation_is_accounted_and_still_replies():
    w = _worker()
    w.handle({"op": "load", "seq": 2, "task_path": "/nonexistent/task.py"})
    assert not w.chan.sent[-1]["ok"]
    w.handle({"op": "memory", "seq": 3})
    assert w.chan.sent[-1]["memory"]["ops"]["load"]["calls"] == 1


def test_touch_leaves_every_dtype_unchanged():
    for t in (torch.randn(5, 7), torch.randn(3, 4).t(), torch.tensor(2.5), torch.arange(10, dtype=torch.int64),
              torch.rand(6) > 0.5, torch.randn(4, dtype=torch.complex64), torch.empty(0),
              torch.arange(7, dtype=torch.int8), torch.randn(9)[1:], torch.randn(3, dtype=torch.float16)):
        before = t.clone()
        harness._touch(t)
        assert torch.equal(t, before), t


def test_reference_stages_fresh_inputs_on_a_gpu_and_fixed_buffers_on_the_cpu():
    fresh = [torch.randn(4, 4), 3]
    ref = harness.Session("reference", {"device": "cpu"})
    ref.device = torch.device("cuda", 0)  # _stage only asks which kind of device it serves
    got = ref._stage(fresh)
    assert got[0] is fresh[0] and got[1] == 3 and ref._bufs is None  # no second input-sized buffer
    cpu_ref = harness.Session("reference", {"device": "cpu"})
    first = cpu_ref._stage([torch.randn(4, 4), 3])
    again = cpu_ref._stage(fresh)
    assert first[0].data_ptr() == again[0].data_ptr() and torch.equal(again[0], fresh[0])
    cand = harness.Session("candidate", {"device": "cpu"})
    first = cand._stage([torch.randn(4, 4), 3])
    again = cand._stage(fresh)
    assert first[0].data_ptr() == again[0].data_ptr()  # the same address on every call
    assert torch.equal(again[0], fresh[0]) and again[0] is not fresh[0]


def test_same_places():
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    layout = [(a.data_ptr(), a.shape, a.dtype, a.stride()), None]
    assert harness._same_places([a, 3], layout)
    assert not harness._same_places([b, 3], layout)  # another address
    assert not harness._same_places([a.view(16), 3], layout)  # another shape
    assert not harness._same_places([a, a], layout) and not harness._same_places([a], layout)


def _gpu_candidate(monkeypatch, backing):
    """A candidate Session that takes itself for a GPU's, whose inputs are made by the test at
    chosen places in backing (the caching allocator's choice, played by the test)."""
    cand = harness.Session("candidate", {"device": "cpu"})
    cand.device = torch.device("cuda", 0)  # staging only asks which kind of device it serves
    monkeypatch.setattr(harness.inputs, "_storage_uses", lambda t: None)  # the test's storage holds every input
    place = {"at": 0}

    def make_inputs(task, seed, dist, device):
        t = torch.empty(0).set_(backing.storage(), place["at"], (4, 4))
        t.copy_(torch.full((4, 4), float(seed)))
        return [t, 3]

    monkeypatch.setattr(harness.inputs, "make_inputs", make_inputs)
    return cand, place


def test_candidate_inputs_take_their_buffers_place_on_a_gpu(monkeypatch):
    """On a GPU the candidate's buffers are freed before new inputs are made, and the new inputs,
    where the allocator put them at the same addresses, are the buffers: no copy, no second
    input-sized block. Where an address moves, fixed buffers and copies from then on."""
    backing = torch.zeros(64)
    cand, place = _gpu_candidate(monkeypatch, backing)
    first = cand._inputs(1, "default")
    assert first is cand._bufs and first[0].data_ptr() == backing.data_ptr() and first[1] == 3
    del first
    again = cand._inputs(2, "default")  # the same place: taken as it is
    assert again[0].data_ptr() == backing.data_ptr() and float(again[0][0, 0]) == 2.0 and not cand._fixed_bufs
    del again
    place["at"] = 16  # the allocator put the next inputs elsewhere
    moved = cand._inputs(3, "default")
    assert cand._fixed_bufs and moved[0].data_ptr() != backing.data_ptr() + 16 * 4
    assert float(moved[0][0, 0]) == 3.0
    buf = moved[0]
    del moved
    place["at"] = 0
    later = cand._inputs(4, "default")  # fixed buffers: a copy into the same one
    assert later[0] is buf and float(buf[0, 0]) == 4.0


def test_candidate_buffers_something_holds_are_copied_into(monkeypatch):
    """Buffers the candidate's model (or anything else) still holds are not let go of: new inputs
    are copied into them, at the same addresses, and they are let go of once nothing holds them."""
    backing = torch.zeros(64)
    cand, place = _gpu_candidate(monkeypatch, backing)
    kept = cand._inputs(1, "default")[0]
    place["at"] = 16
    again = cand._inputs(2, "default")
    assert again[0] is kept and float(kept[0, 0]) == 2.0 and not cand._fixed_bufs
    del again, kept
    place["at"] = 32
    later = cand._inputs(3, "default")  # nothing holds the buffer now: let go of, and it moved
    assert cand._fixed_bufs and float(later[0][0, 0]) == 3.0


class _FakeAllocator:
    """torch.cuda's peak counters, as a test drives them."""

    def __init__(self):
        self.reserved = self.allocated = 0
        self.max_reserved = self.max_allocated = 0

    def use(self, reserved, allocated):
        self.reserved, self.allocated = reserved, allocated
        self.max_reserved = max(self.max_reserved, reserved)
        self.max_allocated = max(self.max_allocated, allocated)

    def reset(self, device=None):
        self.max_reserved, self.max_allocated = self.reserved, self.allocated


def test_peaks_per_operation_and_the_evidence_apart(monkeypatch):
    fake = _FakeAllocator()
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda d=None: fake.max_reserved)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d=None: fake.max_allocated)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", fake.reset)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d=None: (10, 100))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: fake.use(fake.allocated, fake.allocated))
    s = harness.Session("reference", {"device": "cpu"})
    s.device = torch.device("cuda", 0)  # the accounting only asks which kind of device it serves
    s.reset_peak()
    fake.use(40, 30)
    s.op_done("compare", 0.5)
    fake.use(20, 10)
    s.op_done("timed", 0.1)
    # The precision run's float64 copies are evidence: their peak is kept apart.
    fake.use(45, 35)
    s._evidence_begins()
    fake.use(90, 80)
    fake.use(90, 35)  # the copies are freed; their blocks stay cached until empty_cache
    s._evidence_ends()
    fake.use(45, 35)
    s.op_done("compare", 0.5)
    m = s.memory()
    assert m["ops"]["compare"] == {"calls": 2, "seconds": 1.0, "peak_reserved": 45, "peak_allocated": 35}
    # timed ran after compare had reserved 40: reserved peaks are what the process still held.
    assert m["ops"]["timed"]["peak_reserved"] == 40 and m["ops"]["timed"]["peak_allocated"] == 30
    assert (m["peak_reserved"], m["peak_allocated"], m["evidence_peak_reserved"]) == (45, 35, 90)
    assert (m["free"], m["total"]) == (10, 100)
    s.reset_peak()
    assert s.memory()["ops"] == {} and s.memory()["peak_reserved"] == 45  # what it holds now


_SEQUENCE = [(2, "default"), (3, "scaled"), (4, "sparse"), (5, "default"), (6, "large")]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device: the caching allocator's own choice")
def test_the_caching_allocator_hands_large_buffers_back():
    """On a real GPU, an input of its own segment (256 MiB here) made after the buffers are let go
    of lands at the buffer's address under every distribution, so the candidate never falls back to
    fixed buffers and a second input-sized block (measured on an H200 under torch 2.11)."""
    cand = harness.Session("candidate", {"device": "cuda:0"})
    cand.load_task(os.path.join(TASKS, "scale_relu_big.py"))
    first = [t.data_ptr() for t in cand._inputs(1, "default") if isinstance(t, torch.Tensor)]
    for seed, dist in _SEQUENCE:
        work = cand._inputs(seed, dist)
        assert [t.data_ptr() for t in work if isinstance(t, torch.Tensor)] == first, (seed, dist)
        del work
    assert not cand._fixed_bufs


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device: the caching allocator's own choice")
def test_small_inputs_that_move_are_copied_into_fixed_buffers():
    """Inputs under 1 MiB share the allocator's small segments with every other small block, and
    best fit can hand a moved block out (on an H200, matmul_small's first input moved under the
    sparse distribution): the candidate then keeps fixed buffers, at most the inputs' size more,
    and every call still gets exactly the inputs of its seed and distribution at those buffers."""
    task = os.path.join(TASKS, "matmul_small.py")
    cand = harness.Session("candidate", {"device": "cuda:0"})
    cand.load_task(task)
    cand._inputs(1, "default")
    places = None
    for seed, dist in _SEQUENCE:
        work = cand._inputs(seed, dist)
        want = harness.inputs.make_inputs(cand.task, seed, dist, cand.device)
        assert len(work) == len(want) and all(torch.equal(a, b) for a, b in zip(work, want)), (seed, dist)
        if cand._fixed_bufs:
            now = [t.data_ptr() for t in work]
            assert places in (None, now), (seed, dist)  # fixed: the same buffers from then on
            places = now
        del work, want
