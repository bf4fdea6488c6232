import json
import os

import pytest

from kbpworker import __main__ as worker
from kbpworker import channel, protocol

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return torch.relu(x * self.w)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
"""

KERNEL = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return torch.clamp_min(x * self.w, 0.0)
"""


class Recorder:
    """A reply channel that keeps each reply as the driver would read it (through JSON)."""

    def __init__(self):
        self.replies = []

    def send(self, msg):
        self.replies.append(json.loads(json.dumps(channel.jsonable(msg), allow_nan=False)))


class Clock:
    def mark(self, kind, seq):
        pass


def test_every_op_of_the_worker_is_in_the_table():
    served = {name[len("op_"):] for name in dir(worker.Worker) if name.startswith("op_")}
    assert served == set(protocol.OPS)


def test_table_lists_each_field_once():
    for op, spec in protocol.OPS.items():
        request = protocol.ENVELOPE + spec.required + spec.optional
        assert len(set(request)) == len(request), op
        assert len(set(spec.reply)) == len(spec.reply), op
        assert not set(spec.reply) & set(protocol.STATUS), op


@pytest.mark.parametrize("cmd", [
    # What the Go driver sends, field for field.
    {"op": "hello", "seq": 1, "settings": {"device": "cpu", "poison": True, "flush_cache": True, "ext_cache": "/x",
                                           "cpu_threads": 0, "ipc": False}},
    {"op": "prepare", "seq": 1},
    {"op": "load", "seq": 2, "task_path": "t.py", "kernel_path": "k.py", "build": False},
    {"op": "load", "seq": 2, "task_path": "t.py", "init_seed": 5, "mode": "eager"},
    {"op": "trial", "seq": 3, "seed": 1, "dist": "default", "dump": "/d/t1r0", "inputs_dump": "/d/t1r0in"},
    {"op": "timed", "seq": 4, "seed": 0, "dist": "default", "noop": True},
    {"op": "profile", "seq": 5, "seed": 1, "dist": "default", "dump": "/d/profile"},
    {"op": "dump_last", "seq": 6, "dump": "/d/timed0", "inputs_dump": "/d/timed0in"},
    {"op": "compare", "seq": 7, "seed": 1, "dist": "default", "output": {"sig": "T", "leaves": []}, "strides": "",
     "digest": True, "inputs": {"sig": "L", "leaves": []}, "tolerance": {"atol": 1e-3}},
    {"op": "validate", "seq": 8, "distributions": ["default"], "seeds": [11, 12]},
    {"op": "memory", "seq": 9},
    {"op": "guard", "seq": 10},
    {"op": "gc", "seq": 11},
    {"op": "exit", "seq": 12},
])
def test_driver_commands_pass(cmd):
    assert protocol.check(cmd) is None


@pytest.mark.parametrize("cmd, words", [
    ({"op": "trial", "seq": 3, "seed": 1, "dist": "default"}, ("trial", "missing", "'dump'")),
    ({"op": "trial", "seed": 1, "dist": "default", "dump": "/d"}, ("trial", "missing", "'seq'")),
    ({"op": "timed", "seq": 3, "seed": 1, "dist": "default", "noop": False, "fast": True}, ("timed", "unknown", "'fast'")),
    ({"op": "hello", "seq": 1, "settings": {"device": "cpu", "turbo": 1}}, ("hello", "unknown", "'settings.turbo'")),
    ({"op": "hello", "seq": 1, "settings": ["cpu"]}, ("hello", "'settings'", "object")),
    ({"op": "launch", "seq": 1}, ("unknown op", "'launch'")),
    ({"seq": 1}, ("unknown op", "None")),
    (["op", "gc"], ("JSON object",)),
])
def test_a_command_outside_the_table_is_named(cmd, words):
    msg = protocol.check(cmd)
    assert msg is not None
    for w in words:
        assert w in msg, (w, msg)


def test_the_worker_answers_a_malformed_command_with_a_harness_error():
    rec = Recorder()
    w = worker.Worker("reference", rec)
    # No session exists: had the op run, its failure would be a runtime error, not this.
    w.handle({"op": "trial", "seq": 7, "seed": 1, "dist": "default"})
    w.handle({"op": "memory", "seq": 8, "verbose": True})
    w.handle({"op": "launch", "seq": 9})
    assert [r["seq"] for r in rec.replies] == [7, 8, 9]
    for r in rec.replies:
        assert r["ok"] is False and r["error"]["class"] == "harness_error"
    assert "trial" in rec.replies[0]["error"]["message"] and "'dump'" in rec.replies[0]["error"]["message"]
    assert "memory" in rec.replies[1]["error"]["message"] and "'verbose'" in rec.replies[1]["error"]["message"]
    assert rec.replies[2]["error"]["message"] == "unknown op 'launch'"


def test_replies_carry_only_the_fields_the_table_lists(tmp_path):
    task, kernel = tmp_path / "task.py", tmp_path / "kernel.py"
    task.write_text(TASK)
    kernel.write_text(KERNEL)
    dump = str(tmp_path / "out")
    os.mkdir(dump)
    settings = {"device": "cpu", "poison": True, "flush_cache": False}
    seq = iter(range(1, 1000))

    def run(w, rec, op, **fields):
        cmd = dict(fields, op=op, seq=next(seq))
        assert protocol.check(cmd) is None, cmd
        w.handle(cmd)
        reply = rec.replies[-1]
        assert reply["seq"] == cmd["seq"]
        assert reply["ok"] is True, reply
        extra = set(reply) - set(protocol.STATUS) - set(protocol.OPS[op].reply)
        assert not extra, (op, extra)
        return reply

    ref_rec, cand_rec = Recorder(), Recorder()
    ref = worker.Worker("reference", ref_rec, Clock())
    cand = worker.Worker("candidate", cand_rec, Clock())
    run(ref, ref_rec, "hello", settings=settings)
    run(ref, ref_rec, "load", task_path=str(task), init_seed=1, mode="eager")
    run(ref, ref_rec, "validate", distributions=["default"], seeds=[11, 12])
    io = run(ref, ref_rec, "io_bytes", seed=3, dist="default")
    assert io["inputs_bytes"] > 0 and io["output_bytes"] > 0
    run(ref, ref_rec, "timed", seed=0, dist="default", noop=True)
    run(ref, ref_rec, "timed", seed=4, dist="default", noop=False)
    run(cand, cand_rec, "prepare")
    run(cand, cand_rec, "hello", settings=dict(settings, ipc=False))
    run(cand, cand_rec, "load", task_path=str(task), kernel_path=str(kernel), init_seed=1, mode="eager")
    t = run(cand, cand_rec, "trial", seed=3, dist="default", dump=dump + "/t1", inputs_dump=dump + "/t1in")
    c = run(ref, ref_rec, "compare", seed=3, dist="default", output=t["output"], inputs=t["inputs"], strides="any",
            digest=True)
    assert c["result"]["ok"] is True and c["inputs_changed"] == []
    run(cand, cand_rec, "timed", seed=5, dist="default", noop=False)
    d = run(cand, cand_rec, "dump_last", dump=dump + "/timed0", inputs_dump=dump + "/timed0in")
    assert d["late_writes"] is False
    run(ref, ref_rec, "compare", seed=5, dist="default", output=d["output"], inputs=d["inputs"], strides="any")
    p = run(cand, cand_rec, "profile", seed=6, dist="default", dump=dump + "/profile")
    run(ref, ref_rec, "compare", seed=6, dist="default", output=p["output"], strides="any", precision=True)
    assert run(cand, cand_rec, "guard")["tampered"] == []
    for w, rec in ((ref, ref_rec), (cand, cand_rec)):
        run(w, rec, "memory")
        run(w, rec, "gc")
