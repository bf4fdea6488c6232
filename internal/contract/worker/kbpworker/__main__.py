"""Entry point: python -B run.py {reference|candidate}.

The driver speaks first (hello with settings), then sends one command at a time and waits for the
reply. Replies carry the command's seq; a timed call's start and end are marked on the clock
channel. protocol.py lists every op with its command's and its reply's fields.
"""

import os
import sys
import time

import torch

from . import (channel, compare, errors, extcache, fingerprint, guard, harness, inputs, precision, profile, protocol,
               tensorfile, transport)

OWN_MODULES = (channel, compare, errors, extcache, fingerprint, guard, harness, inputs, precision, profile, protocol,
               tensorfile, transport)
_perf_counter = time.perf_counter  # captured before any candidate code runs
PROTOCOL = 6  # 6: the io_bytes op; 5: the inputs_repeat op; 4: the profile op and the compare op's precision field


def _apply_settings(settings):
    threads = int(settings.get("cpu_threads", 0) or 0)
    if threads > 0:
        torch.set_num_threads(threads)
    # The contract compares against full fp32: TF32 would make the reference itself inexact.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    arch = settings.get("cuda_arch")
    if arch and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch


def _preload_dynamo():
    """Import torch._dynamo before the guard's snapshot. Its import wraps torch.manual_seed (once,
    for the whole process), and torch.compile imports it on first use: without this, a baseline in
    a compile mode, or a candidate that calls torch.compile, reads as one that patched the harness."""
    try:
        import torch._dynamo  # noqa: F401
    except ImportError:  # torch < 2.0 has no torch.compile
        pass


class Worker:
    def __init__(self, role, chan, clock=None):
        self.role = role
        self.chan = chan
        self.clock = clock
        self.session = None
        self.guard = None
        self.ext = None

    def reply(self, seq, body):
        body["seq"] = seq
        self.chan.send(body)

    def tampered(self):
        return self.guard.check() if self.guard else []

    # Operations left out of the per-operation accounting: they are the accounting's own, or come
    # before there is a session to account to.
    UNACCOUNTED = ("hello", "memory", "exit", "gc")

    def handle(self, cmd):
        seq = cmd.get("seq") if isinstance(cmd, dict) else None
        # A command the protocol does not describe (an unknown op, a missing or unknown field) is
        # the driver's mistake: say which, before any op runs on it.
        problem = protocol.check(cmd)
        fn = getattr(self, "op_" + cmd["op"], None) if problem is None else None
        if fn is None:
            problem = problem or "unknown op %r" % cmd["op"]
            return self.reply(seq, {"ok": False, "error": {"class": "harness_error", "message": problem}})
        t0 = _perf_counter()
        try:
            body = fn(cmd, seq)
        except Exception as e:  # every failure becomes a structured reply
            phase = cmd.get("phase", "call")
            if isinstance(e, (errors.HarnessError, inputs.InputError, tensorfile.TensorFileError, transport.TransportError)):
                body = {"ok": False, "error": dict(errors.describe(e, phase), **{"class": "harness_error"})}
            elif isinstance(e, errors.TaskError):
                # Its message is the whole of what the task's author needs, without a type name.
                body = {"ok": False, "error": dict(errors.describe(e, "task"), **{"class": "reference_error",
                                                                                  "message": str(e)})}
            else:
                body = harness.error_reply(e, phase)
            if self.role == "candidate":
                body["tampered"] = self.tampered()
        if self.session is not None and cmd["op"] not in self.UNACCOUNTED:
            try:
                self.session.op_done(cmd["op"], _perf_counter() - t0)
            except Exception:  # accounting is evidence: it never changes a reply
                pass
        if body is not None:
            self.reply(seq, body)

    # ---- ops ---------------------------------------------------------------------------------

    def op_hello(self, cmd, seq):
        settings = cmd.get("settings", {})
        _apply_settings(settings)
        self.session = harness.Session(self.role, settings)
        cache_dir = settings.get("ext_cache")
        if cache_dir:
            self.ext = extcache.ExtensionCache(cache_dir, settings.get("recipe"))
            self.ext.install()
        if self.role == "candidate":
            _preload_dynamo()
            self.guard = guard.Guard()
            self.guard.capture(OWN_MODULES + (sys.modules[__name__],))
        return {"ok": True, "protocol": PROTOCOL, "pid": os.getpid(), "ipc": transport.ipc_available(),
                "fingerprint": fingerprint.collect(self.session.device)}

    def op_prepare(self, cmd, seq):
        """A spare process: import what its role's hello and load import, touch no device. Only a
        candidate needs torch._dynamo (before the guard's snapshot); a reference runs the task's
        own Model eagerly, and the import is seconds of CPU that a spare makes only outside
        timing phases. Both import what the fingerprint reads (triton's version)."""
        if self.role == "candidate":
            _preload_dynamo()
        fingerprint.preload()
        return {"ok": True}

    def op_load(self, cmd, seq):
        s = self.session
        cmd["phase"] = "load"
        if cmd.get("build", True):
            s.reserve_flush_buffer()  # before the task or the candidate allocates anything
        s.load_task(cmd["task_path"])
        if self.role == "candidate":
            cls = s.import_candidate(cmd["kernel_path"])
        else:
            cls = s.task.Model
        body = {"ok": True}
        if cmd.get("build", True):
            cmd["phase"] = "init"
            s.build(cls, int(cmd.get("init_seed", 0)), cmd.get("mode", "eager"))
            if s.model_compile_s is not None:
                body["model_compile_s"] = s.model_compile_s
            if self.role == "reference":
                cmd["phase"] = "footprint"
                fp = s.footprint(int(cmd.get("init_seed", 0)))
                if fp is not None:
                    body["footprint"] = fp
            s.reset_peak()
            body["memory"] = s.memory()
        if self.ext is not None:
            body["ext_builds"], body["ext_hits"] = self.ext.builds, self.ext.hits
        if self.role == "candidate":
            body["tampered"] = self.tampered()
        return body

    def op_trial(self, cmd, seq):
        res = self.session.trial(int(cmd["seed"]), cmd["dist"], cmd["dump"], cmd.get("inputs_dump"))
        res["ok"] = True
        res["tampered"] = self.tampered()
        return res

    def op_timed(self, cmd, seq):
        if self.clock is None:
            raise errors.HarnessError("no clock channel (KBP_CLOCK_FD)")
        armed = lambda: self.clock.mark(b"A", seq)  # noqa: E731
        finished = lambda r: self.clock.mark(b"D", seq)  # noqa: E731
        res = self.session.timed(int(cmd.get("seed", 0)), cmd.get("dist", "default"), armed, finished,
                                 bool(cmd.get("noop")))
        res["ok"] = True
        return res

    def op_profile(self, cmd, seq):
        cmd["phase"] = "profile"
        mods = sorted(self.ext.modules) if self.ext is not None else []
        res = self.session.profiled(int(cmd["seed"]), cmd["dist"], cmd["dump"], mods)
        res["ok"] = True
        res["tampered"] = self.tampered()
        return res

    def op_dump_last(self, cmd, seq):
        res = self.session.dump_last(cmd["dump"], cmd.get("inputs_dump"))
        res["ok"] = True
        res["tampered"] = self.tampered()
        return res

    def op_memory(self, cmd, seq):
        return {"ok": True, "memory": self.session.memory()}

    def op_guard(self, cmd, seq):
        return {"ok": True, "tampered": self.tampered()}

    def op_compare(self, cmd, seq):
        res = self.session.compare(int(cmd["seed"]), cmd["dist"], cmd["output"], cmd.get("tolerance"),
                                   cmd.get("strides", "any"), cmd.get("inputs"), bool(cmd.get("digest")),
                                   bool(cmd.get("precision")))
        res["ok"] = True
        return res

    def op_sensitivity(self, cmd, seq):
        res = self.session.sensitivity(cmd["trials"], int(cmd["seed"]), cmd.get("tolerance"))
        res["ok"] = True
        return res

    def op_probe(self, cmd, seq):
        res = self.session.probe(cmd["distributions"], int(cmd["seed"]), cmd.get("tolerance"))
        res["ok"] = True
        return res

    def op_inputs_repeat(self, cmd, seq):
        return {"ok": True, "differ": self.session.inputs_repeat(int(cmd["seed"]), cmd["dist"])}

    def op_io_bytes(self, cmd, seq):
        res = self.session.io_bytes(int(cmd["seed"]), cmd["dist"])
        res["ok"] = True
        return res

    def op_validate(self, cmd, seq):
        rep = self.session.validate(cmd["distributions"], [int(s) for s in cmd["seeds"]], cmd.get("tolerance"))
        rep["ok"] = True
        return rep

    def op_gc(self, cmd, seq):
        harness.collect_garbage()
        return {"ok": True}

    def op_exit(self, cmd, seq):
        self.reply(seq, {"ok": True})
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def main(argv):
    if len(argv) < 2 or argv[1] not in ("reference", "candidate"):
        sys.stderr.write("usage: run.py {reference|candidate}\n")
        return 2
    chan = channel.Channel.from_env()
    w = Worker(argv[1], chan, channel.Clock.from_env())
    while True:
        cmd = chan.recv()
        if cmd is None:
            return 0
        w.handle(cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
