"""The driver-worker protocol: every op the Go driver sends, the fields of its command and the
fields of its reply, in one table.

The Go side types the same protocol (internal/contract/protocol.go); TestProtocolMatchesWorker
runs this module and compares the two, so neither side can add, drop or rename a field alone.
Commands are checked on receipt (check): a command the table does not describe is answered with a
harness_error naming the op and the field, before any op runs. Replies are not checked here: the
table says what each op's reply may carry, and the worker's tests hold the ops to it.

Standard library only, and no other worker module: the Go test imports this file with whatever
Python it finds, torch or not.
"""

import collections

# Every command carries these: the op's name and the number its reply must echo.
ENVELOPE = ("op", "seq")

# Any reply may carry these: its command's seq, whether the op succeeded, the structured error when
# it did not, and (from a candidate) what the tamper guard found replaced.
STATUS = ("seq", "ok", "error", "tampered")

# The keys of hello's settings object: how the worker runs (device, allocator poisoning, cache
# flushing, extension cache and build recipe, CPU threads, CUDA arch, CUDA IPC). All optional.
SETTINGS = ("device", "poison", "flush_cache", "ext_cache", "cpu_threads", "cuda_arch", "recipe", "ipc")

# required, optional: the command's own fields (beyond ENVELOPE); reply: the reply's own fields
# (beyond STATUS), each present or not as the op's result has it.
Op = collections.namedtuple("Op", "required optional reply")

OPS = {
    # Either role, first: apply the settings, start the session; the reply identifies the worker.
    "hello": Op((), ("settings",), ("protocol", "pid", "ipc", "fingerprint")),
    # A spare candidate process: import what every evaluation imports, touch no device.
    "prepare": Op((), (), ()),
    # Load the task (and, for the candidate, its kernel file); build both models from init_seed
    # unless build is false (the compile step only imports).
    "load": Op(("task_path",), ("kernel_path", "build", "init_seed", "mode"),
               ("model_compile_s", "footprint", "memory", "ext_builds", "ext_hits")),
    # Candidate: one correctness call; its output (and inputs) exported for the reference.
    "trial": Op(("seed", "dist", "dump"), ("inputs_dump",), ("output", "inputs", "mutated", "call_ms", "unordered")),
    # Either role: one timed call, bracketed by marks on the clock channel.
    "timed": Op((), ("seed", "dist", "noop"), ("device_ms", "host_ms", "threads_started")),
    # Candidate: one more correctness call under the profiler, never timed (runtime evidence).
    "profile": Op(("seed", "dist", "dump"), (), ("output", "profile")),
    # Candidate: export the last timed call's output and inputs for a re-check.
    "dump_last": Op(("dump",), ("inputs_dump",), ("output", "inputs", "late_writes")),
    # Either role: the allocator's peak device memory since the last load.
    "memory": Op((), (), ("memory",)),
    # Candidate: run the tamper guard now.
    "guard": Op((), (), ()),
    # Reference: compare a candidate's exported output (and inputs) with its own for the seed.
    "compare": Op(("seed", "dist", "output"), ("tolerance", "strides", "inputs", "digest", "precision"),
                  ("inputs_changed", "ref_call_ms", "result", "digest", "precision")),
    # Reference: whether one fixed output would pass the trials (seed, dist); if one would, the first
    # other distribution whose output for seed every such constant fails.
    "sensitivity": Op(("trials", "seed"), ("tolerance",), ("varies", "dist", "probed", "ref_call_ms")),
    # Reference: for each distribution, whether the reference stays finite under it and its output
    # differs from the task's own inputs' (the distributions an evaluation adds a trial under).
    "probe": Op(("distributions", "seed"), ("tolerance",), ("probes", "ref_call_ms")),
    # Reference: make the task's inputs for (seed, dist) twice; the positions that differ (a task
    # whose get_inputs is not a function of its seed).
    "inputs_repeat": Op(("seed", "dist"), (), ("differ",)),
    # Reference: the bytes of the task's inputs and of its output for (seed, dist), which a trial
    # dumps as files where tensors do not travel by CUDA IPC (the work folder's room).
    "io_bytes": Op(("seed", "dist"), (), ("inputs_bytes", "output_bytes")),
    # Reference: run the task's reference on every distribution and report whether it is usable.
    "validate": Op(("distributions", "seeds"), ("tolerance",), ("distributions", "warnings", "sensitivity")),
    # Either role: collect garbage and give cached device memory back.
    "gc": Op((), (), ()),
    # Either role: reply, then end the process.
    "exit": Op((), (), ()),
}


def check(cmd):
    """Return why cmd is not a command this protocol describes, naming the op and the field, or
    None when it is one."""
    if not isinstance(cmd, dict):
        return "a command must be a JSON object, not %s" % type(cmd).__name__
    op = cmd.get("op")
    spec = OPS.get(op) if isinstance(op, str) else None
    if spec is None:
        return "unknown op %r" % (op,)
    for name in ENVELOPE + spec.required:
        if name not in cmd:
            return "%s: missing field %r" % (op, name)
    known = ENVELOPE + spec.required + spec.optional
    for name in sorted(cmd):
        if name not in known:
            return "%s: unknown field %r" % (op, name)
    if "settings" in cmd:
        settings = cmd["settings"]
        if not isinstance(settings, dict):
            return "%s: field 'settings' must be an object" % op
        for name in sorted(settings):
            if name not in SETTINGS:
                return "%s: unknown field %r" % (op, "settings." + name)
    return None


def table():
    """The table as plain JSON-ready data (for the Go side's comparison)."""
    return {
        "envelope": list(ENVELOPE),
        "status": list(STATUS),
        "settings": list(SETTINGS),
        "ops": {op: {"required": list(s.required), "optional": list(s.optional), "reply": list(s.reply)}
                for op, s in OPS.items()},
    }


if __name__ == "__main__":
    import json
    import sys

    json.dump(table(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
