"""The operations a worker serves. The Go driver sends one command at a time.

Two roles share this code:
  reference  a clean process: the task's Model, its timing, and the trusted comparison of a
             candidate's dumped outputs against reference outputs it recomputes from the seed;
  candidate  the untrusted process: imports the candidate file, runs correctness trials and timed
             calls, dumps raw outputs, reports raw timing samples and tamper checks.
"""

import gc
import importlib.util
import os
import sys
import threading
import time

import torch

from . import compare, inputs, precision, probe, profile, sensitivity, tensorfile, transport
from .errors import HarnessError, LoadError, TaskError, describe

# Captured before any candidate code can run; the harness calls these, never the module attributes.
_perf_ns = time.perf_counter_ns
_no_grad = torch.no_grad
_empty = torch.empty
_Tensor = torch.Tensor
_clone = torch.Tensor.clone
_copy = torch.Tensor.copy_
_isinstance = isinstance
_listdir = os.listdir
_active_count = threading.active_count
if torch.cuda.is_available():
    _cuda_sync = torch.cuda.synchronize
    _Event = torch.cuda.Event
    _ev_record = torch.cuda.Event.record
    _ev_elapsed = torch.cuda.Event.elapsed_time
    _ev_sync = torch.cuda.Event.synchronize
else:
    _cuda_sync = _Event = _ev_record = _ev_elapsed = _ev_sync = None

L2_FLUSH_BYTES = 256 << 20
CPU_FLUSH_BYTES = 32 << 20


def _thread_count():
    """Threads of this process, native ones included (Linux); Python threads elsewhere."""
    try:
        return len(_listdir("/proc/self/task"))
    except OSError:
        return _active_count()


def _tensor_meta(t):
    return {"dtype": tensorfile.dtype_name(t.dtype), "shape": list(t.shape)}


class Session:
    def __init__(self, role, settings):
        self.role = role
        self.settings = settings
        self.device = torch.device(settings.get("device", "cpu"))
        self.task = None
        self.model = None
        self.mode = "eager"
        self.last_output = None
        self._last_digest = None
        self._bufs = None  # the input buffers every call of the candidate's model sees
        self._fixed_bufs = False  # an address did not come back: copy into fixed buffers (_stage)
        self._held = []  # tensors exported to the reference process, alive until the next call
        # Outputs of earlier calls, filled with NaN bytes before they are freed: the memory the
        # caching allocator hands out next is mostly theirs, so an output that is allocated but
        # never written cannot inherit an earlier result (and poisoning costs no allocation).
        self._poisonable = []
        self._flush_buf = None
        self._ref_cache = []
        self._samples = sensitivity.Samples()  # of the reference outputs computed since the build
        self._footprint = None
        # Accounting since the last load: per operation its calls, seconds inside this process and
        # the allocator's peak while it ran; the evaluation's peak; the float64 precision run's
        # own peak, kept apart (see _evidence_begins).
        self._ops = {}
        self._peak = (0, 0)  # (reserved, allocated)
        self._pending_peak = (0, 0)
        self._evidence_peak = 0
        # Outputs stay on the GPU and reach the reference process through CUDA IPC.
        self.ipc = bool(settings.get("ipc")) and self.device.type == "cuda"
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            self._ev0 = _Event(enable_timing=True)
            self._ev1 = _Event(enable_timing=True)

    # ---- setup -------------------------------------------------------------------------------

    def load_task(self, path):
        with open(path) as f:
            source = f.read()
        mod = type(sys)("kbp_task")
        mod.__file__ = path
        sys.modules["kbp_task"] = mod
        try:
            exec(compile(source, path, "exec"), mod.__dict__)
        except SyntaxError as e:
            # The task's own line, not the worker's copy's path: the author fixes the file.
            where = "line %s" % e.lineno if e.lineno else "an unknown line"
            text = (e.text or "").strip()
            raise TaskError("the task file does not parse: %s: %s at %s%s" % (
                type(e).__name__, e.msg, where, ": " + text if text else ""))
        except Exception as e:
            raise TaskError("the task file does not load: %s: %s" % (type(e).__name__, e))
        missing = [name for name in ("Model", "get_inputs", "get_init_inputs") if not hasattr(mod, name)]
        if missing:
            raise TaskError("the task file does not define %s" % ", ".join(missing))
        self.task = mod

    def import_candidate(self, path):
        spec = importlib.util.spec_from_file_location("kbp_candidate", path)
        if spec is None:
            raise LoadError("cannot import %s" % path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["kbp_candidate"] = mod
        spec.loader.exec_module(mod)
        cls = getattr(mod, "ModelNew", None)
        if cls is None:
            raise LoadError("%s does not define ModelNew" % os.path.basename(path))
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            raise LoadError("ModelNew in %s is not a torch.nn.Module subclass" % os.path.basename(path))
        return cls

    def build(self, cls, init_seed, mode="eager"):
        init = inputs.make_init_inputs(self.task, init_seed)
        inputs.seed_all(init_seed)
        model = cls(*init)
        if isinstance(model, torch.nn.Module):
            model = model.to(self.device)
        self.model_compile_s = None
        self.mode = mode
        if mode != "eager":
            model = _compiled(model, mode)
        self.model = model
        self._ref_cache = []
        self._samples.clear()
        self._bufs = None
        self._fixed_bufs = False
        self._held = []
        if mode != "eager":
            # torch.compile works on the first call. Make that call here, under the load's (long)
            # limit rather than a trial's, and report its time apart: compile time is never timed.
            t0 = _perf_ns()
            self._call(inputs.make_inputs(self.task, init_seed, "default", self.device))
            self.model_compile_s = (_perf_ns() - t0) / 1e9

    # ---- calls -------------------------------------------------------------------------------

    def sync(self):
        if self.device.type == "cuda":
            _cuda_sync(self.device)

    def _call(self, args):
        with _no_grad():
            out = self.model(*args)
        self.sync()
        return out

    def _inputs(self, seed, dist):
        """New inputs for one call of this side's model, staged (_stage)."""
        moving = self._let_go_of_buffers()
        return self._stage(inputs.make_inputs(self.task, seed, dist, self.device), moving)

    def _let_go_of_buffers(self):
        """On a GPU, the candidate's input buffers are freed before new inputs are generated, so
        the caching allocator hands their blocks to the new inputs (a freed block goes to the next
        request of its size): the same addresses with new contents, without the copy's second
        input-sized buffer. Returns the buffers' addresses and layouts, to check that they came
        back; None where the buffers stay (the CPU, a reference, the first call, an evaluation
        where an address did not come back, or buffers something else still holds: the candidate's
        model, an output that is an input)."""
        bufs = self._bufs
        if self.role != "candidate" or self.device.type != "cuda" or self._fixed_bufs or bufs is None:
            return None
        del bufs
        if any(inputs._held_elsewhere(self._bufs)):
            return None
        layout = [(b.data_ptr(), b.shape, b.dtype, b.stride()) if _isinstance(b, _Tensor) else None for b in self._bufs]
        self._bufs = None  # their memory is free now: nothing else held them
        return layout

    def _stage(self, fresh, moving=None):
        """Give the candidate its inputs at the same addresses with new contents on every call (a
        cache keyed on data_ptr returns stale results). Where the buffers were let go of
        (_let_go_of_buffers) the new inputs are in their memory and are the buffers now; where an
        address did not come back, that call and every later one of the evaluation copy into fixed
        buffers. Elsewhere the buffers are made on first use and new inputs copied into them.
        Inputs that are kept are read and written once (_touch), the memory traffic of a copy, so
        that what precedes a call is the same either way and on both sides.

        On a GPU the reference (the task's own model, which caches nothing) calls on the fresh
        inputs themselves, after the same read-and-write pass: it holds no second input-sized
        buffer (the fixed buffers had made its timing phase hold inputs twice). On the CPU both
        sides copy into fixed buffers: there the allocator hands freed memory back to the system,
        and a reference that allocated inputs and outputs afresh paid page faults on each call (the
        suite's ReLU at its CPU size: 14 ms a call against 2.5 ms)."""
        if self.role == "reference" and self.device.type == "cuda":
            for f in fresh:
                if _isinstance(f, _Tensor):
                    _touch(f)
            return list(fresh)
        if self.role == "candidate" and self.device.type == "cuda" and not self._fixed_bufs and (
                self._bufs is None or moving is not None):
            if moving is None or _same_places(fresh, moving):
                for f in fresh:
                    if _isinstance(f, _Tensor):
                        _touch(f)
                self._bufs = list(fresh)
                return self._bufs
            self._fixed_bufs = True  # an address moved: fixed buffers from here on
        bufs = self._bufs
        if bufs is None or len(bufs) != len(fresh) or not all(
            _isinstance(b, _Tensor) == _isinstance(f, _Tensor)
            and (not _isinstance(f, _Tensor) or (b.shape == f.shape and b.dtype == f.dtype and b.stride() == f.stride()))
            for b, f in zip(bufs, fresh)
        ):
            bufs = [torch.empty_like(f) if _isinstance(f, _Tensor) else f for f in fresh]
        out = []
        for b, f in zip(bufs, fresh):
            if _isinstance(f, _Tensor):
                _copy(b, f)
                out.append(b)
            else:
                out.append(f)
        self._bufs = out
        return out

    def _digests(self, values):
        return [compare.digest(v) if _isinstance(v, _Tensor) else None for v in values]

    def _release(self):
        """Let go of what the reference process has read and of the last timed output. Outputs
        nothing else holds are filled with NaN bytes first: their memory is what the caching
        allocator hands out next, so an output that is allocated but never written cannot inherit
        an earlier result. An output the candidate keeps (a cached tensor it returns again) is
        left alone."""
        pending, self._poisonable = self._poisonable, []
        self._held = []
        self.last_output = None
        if not self.settings.get("poison", True):
            return
        while pending:
            t = pending.pop()
            # References now: t here and getrefcount's argument.
            if sys.getrefcount(t) <= 2 and _sole_owner(t):
                _fill(t, 255)
            del t

    def _keep(self, out):
        """Remember a call's output tensors, to poison them when they are let go."""
        _, leaves = compare.flatten(out)
        self._poisonable.extend(t for t in leaves if _isinstance(t, _Tensor) and t.device.type == "cuda")

    def reserve_flush_buffer(self):
        """Allocate the cache-flush buffer, which lives as long as the process, before anything
        else on the device (a compile process, which times nothing, never does). Made lazily at
        the first timed call, it was carved out of whatever free block the allocator held then,
        typically an input- or output-sized one: that block could no longer hold an input or
        output, and the next one took a new segment (on the H200, KernelBench's 6 GiB ReLU cost a
        third 6 GiB segment per side for it)."""
        if self.device.type == "cuda":
            self._flush_buffer()

    def _flush_buffer(self):
        if self._flush_buf is None and self.settings.get("flush_cache", True):
            n = L2_FLUSH_BYTES if self.device.type == "cuda" else CPU_FLUSH_BYTES
            self._flush_buf = _empty(n, dtype=torch.int8, device=self.device)
        return self._flush_buf

    def _flush(self):
        buf = self._flush_buffer()
        if buf is not None:
            buf.zero_()

    def _export(self, values, base):
        """Describe values for the reference process and keep them alive until the next call."""
        sig, leaves = compare.flatten(values)
        items = []
        for i, leaf in enumerate(leaves):
            if _isinstance(leaf, _Tensor):
                items.append(transport.export(leaf, "%s.%d" % (base, i), self.ipc))
                self._held.append(leaf)
            else:
                items.append({"value": leaf})
        return {"sig": sig, "leaves": items}

    def trial(self, seed, dist, dump, inputs_dump=None):
        """One correctness call. The output (and, if asked, the inputs after the call) stay alive
        and are exported for the reference process, which compares them while the driver keeps this
        process stopped. A second trial on the same seed is the nondeterminism check."""
        self._release()
        work = self._inputs(seed, dist)
        before = self._digests(work)
        t0 = _perf_ns()
        with _no_grad():
            out = self.model(*work)
        ordered = self._stream_digests(out)
        self.sync()
        call_ms = (_perf_ns() - t0) / 1e6
        self._keep(out)
        mutated = [i for i, (d, w) in enumerate(zip(before, work)) if d is not None and compare.digest(w) != d]
        res = {"output": self._export(out, dump), "mutated": mutated, "call_ms": call_ms}
        if ordered is not None:
            final = self._stream_digests(out)
            unordered = [i for i, (a, b) in enumerate(zip(ordered, final)) if a != b]
            if unordered:
                res["unordered"] = unordered
        if inputs_dump:
            res["inputs"] = self._export(list(work), inputs_dump)
        return res

    def _stream_digests(self, out):
        """On a GPU, digests of out's tensors read in order on the caller's current stream alone:
        each digest's reductions are queued on the current stream and read back with a copy that
        waits for that stream, not for the device. A kernel whose work runs on another stream that
        the current one does not wait for (a side stream without an event or wait_stream back) may
        not have written its output yet, and in a model the next operation on the caller's stream
        would read it unfinished. The digests taken again after a device-wide synchronisation then
        differ. None on the CPU, and for a baseline (the task's own model under a torch.compile
        mode: PyTorch's own stream handling, not a kernel under judgement)."""
        if self.device.type != "cuda" or self.mode != "eager":
            return None
        _, leaves = compare.flatten(out)
        return [compare.digest(x) if _isinstance(x, _Tensor) and x.is_cuda else None for x in leaves]

    def profiled(self, seed, dist, dump, ext_modules):
        """One extra correctness call under the profiler, never timed: the runtime evidence
        (profile.py). Its output is exported like a trial's, and the reference compares it."""
        self._release()
        work = self._inputs(seed, dist)
        out, evidence = profile.profiled_call(lambda: self._call(work), self.device.type, ext_modules)
        self._keep(out)
        return {"output": self._export(out, dump), "profile": evidence}

    def timed(self, seed, dist, armed, finished, noop=False):
        """One timed call on fresh inputs. armed() is called right before the timed region starts
        and finished() right after it ends: they send the clock channel's marks, which the kernel
        stamps, so the driver's clock brackets the region."""
        self._ref_cache = []  # the reference's compare cache is rebuilt per re-checked seed
        if not noop:
            self._release()
            # Both sides do the same work before a timed call (new inputs copied into the fixed
            # buffers, the earlier output poisoned): what precedes a call can change its time.
            work = self._inputs(seed, dist)
        self._flush()
        self.sync()
        threads = _thread_count()
        armed()
        t0 = _perf_ns()
        if self.device.type == "cuda":
            _ev_record(self._ev0)
            if not noop:
                with _no_grad():
                    out = self.model(*work)
            _cuda_sync(self.device)
            _ev_record(self._ev1)
            _ev_sync(self._ev1)
            t1 = _perf_ns()
            dev_ms = _ev_elapsed(self._ev0, self._ev1)
        else:
            if not noop:
                with _no_grad():
                    out = self.model(*work)
            t1 = _perf_ns()
            dev_ms = (t1 - t0) / 1e6
        res = {"device_ms": dev_ms, "host_ms": (t1 - t0) / 1e6}
        finished(res)
        # A thread the call started and left running does its work outside the timed region.
        started = _thread_count() - threads
        if started > 0:
            res["threads_started"] = started
        if not noop:
            self._keep(out)
        if not noop and self.role == "candidate":
            # A digest of the result the moment the timed region ended. dump_last compares the live
            # output with it: work finished in the background after the call returned shows up.
            _, leaves = compare.flatten(out)
            self.last_output = out
            self._last_digest = self._digests(leaves)
        return res

    def dump_last(self, base, inputs_dump=None):
        """Export the last timed call's output (and its inputs) for a re-check, and say whether the
        output changed after the call returned."""
        if self.last_output is None:
            raise HarnessError("no timed call to dump")
        self.sync()
        _, live = compare.flatten(self.last_output)
        late = self._digests(live) != self._last_digest
        out = self.last_output
        res = {"output": self._export(out, base), "late_writes": late}
        if inputs_dump:
            res["inputs"] = self._export(list(self._bufs), inputs_dump)
        return res

    def _peaks(self):
        """The allocator's peaks since the last reset, (reserved, allocated), and a new reset.
        Reserved is what the process holds on the device; allocated is what its live tensors
        used: where reserved runs ahead, the allocator's cached blocks did not fit a request."""
        if self.device.type != "cuda":
            return (0, 0)
        peaks = (int(torch.cuda.max_memory_reserved(self.device)), int(torch.cuda.max_memory_allocated(self.device)))
        torch.cuda.reset_peak_memory_stats(self.device)
        return peaks

    def op_done(self, op, seconds):
        """Account one operation: its time inside this process and the peaks it reached."""
        peak = _pairmax(self._pending_peak, self._peaks())
        self._pending_peak = (0, 0)
        st = self._ops.setdefault(op, {"calls": 0, "seconds": 0.0, "peak_reserved": 0, "peak_allocated": 0})
        st["calls"] += 1
        st["seconds"] += seconds
        st["peak_reserved"] = max(st["peak_reserved"], peak[0])
        st["peak_allocated"] = max(st["peak_allocated"], peak[1])
        self._peak = _pairmax(self._peak, peak)

    def memory(self):
        """What this process did since the last load: per operation (calls, seconds, peaks), and
        on a GPU the peak device memory its allocator held and its tensors used."""
        res = {"ops": self._ops}
        if self.device.type != "cuda":
            return res
        free, total = torch.cuda.mem_get_info(self.device)
        now = (int(torch.cuda.max_memory_reserved(self.device)), int(torch.cuda.max_memory_allocated(self.device)))
        peak = _pairmax(_pairmax(self._peak, self._pending_peak), now)
        harness = self._flush_buf.numel() * self._flush_buf.element_size() if self._flush_buf is not None else 0
        res.update(peak_reserved=peak[0], peak_allocated=peak[1], evidence_peak_reserved=self._evidence_peak,
                   harness=int(harness), free=int(free), total=int(total))
        return res

    def reset_peak(self):
        self._ops = {}
        self._peak = self._pending_peak = (0, 0)
        self._evidence_peak = 0
        self._peaks()

    # The float64 precision run is evidence, made once after timing when memory allows: its
    # peak is reported apart, so an evaluation's peak says what judging the kernel needs (on the
    # H200 the float64 copies of KernelBench's 6 GiB ReLU tensors took the sum from 4.1x to 5.6x
    # its footprint). The operation's peaks so far are set aside before it and counting starts
    # afresh after.

    def _evidence_begins(self):
        self._pending_peak = _pairmax(self._pending_peak, self._peaks())

    def _evidence_ends(self):
        if self.device.type == "cuda":
            self._evidence_peak = max(self._evidence_peak, self._peaks()[0])
            torch.cuda.empty_cache()
            self._peaks()

    def footprint(self, seed):
        """Peak memory of one eager forward of the task: weights, inputs, outputs and the forward's
        own temporaries (measured once per process, on the GPU)."""
        if self.device.type != "cuda":
            return None
        if self._footprint is None:
            self._ref_cache = []
            self._release()
            self._bufs = None
            self.sync()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
            args = inputs.make_inputs(self.task, seed, "default", self.device)
            out = self._call(args)
            del out, args
            # The flush buffer, allocated first, is the harness's, not the task's.
            flush = self._flush_buf.numel() if self._flush_buf is not None else 0
            self._footprint = int(torch.cuda.max_memory_allocated(self.device)) - flush
        return self._footprint

    # ---- reference side ----------------------------------------------------------------------

    def reference(self, seed, dist):
        for key, val in self._ref_cache:
            if key == (seed, dist):
                return val
        self._ref_cache = []  # one reference output at a time: it can be GBs
        args = inputs.make_inputs(self.task, seed, dist, self.device)
        t0 = _perf_ns()
        out = self._call(args)
        self.last_ref_ms = (_perf_ns() - t0) / 1e6
        del args
        val = compare.flatten(out)
        self._ref_cache = [((seed, dist), val)]
        self._samples.put((seed, dist), val)
        return val

    def _reference_timed(self, seed, dist):
        """reference(), and the milliseconds its call took (0 when it was cached)."""
        self.last_ref_ms = 0.0
        val = self.reference(seed, dist)
        return val, self.last_ref_ms

    def sensitivity(self, trials, seed, tol=None):
        """Whether one fixed output would pass every one of an evaluation's trials, and if so,
        which other distribution gives an output every such constant fails (sensitivity.py)."""
        self._release()
        keys = [(int(t["seed"]), t["dist"]) for t in trials]
        return sensitivity.check(self._samples, self._reference_timed, keys, seed, tol)

    def probe(self, dists, seed, tol=None):
        """For each of dists: whether the reference raises under it, stays finite, and gives an
        output that differs from its output on the task's own inputs for seed (compared at the
        sampled positions: probe.py)."""
        self._release()
        self._ref_cache = []
        ms = 0.0
        base, t = self._reference_timed(seed, "default")
        ms += t
        del base
        found = []
        for dist in dists:
            entry = {"dist": dist}
            try:
                val, t = self._reference_timed(seed, dist)
                ms += t
            except Exception as e:  # noqa: BLE001 - the reference's own failure is the answer
                entry["error"] = probe.describe(e)
                found.append(entry)
                self._ref_cache = []
                continue
            entry["finite"] = sensitivity.finite(val)
            del val
            self._ref_cache = []
            entry["changes"] = probe.changes(self._samples.get((seed, "default")), self._samples.get((seed, dist)), tol)
            found.append(entry)
        return {"probes": found, "ref_call_ms": ms}

    def compare(self, seed, dist, output, tol=None, strides="any", inputs_manifest=None, want_digest=False,
                want_precision=False):
        """Compare a candidate's exported output with the reference for (seed, dist); with
        inputs_manifest, also check the candidate's inputs after its call against inputs
        regenerated from the seed. Reports a digest of what was read, for the driver's
        nondeterminism check across two calls on one input, and with want_precision the
        measured precision of a correct output (precision.py)."""
        # The inputs are checked before the reference output is computed: at most two input- or
        # output-sized tensors are alive at once.
        self._release()
        if self._ref_cache and self._ref_cache[0][0] != (seed, dist):
            self._ref_cache = []  # another seed's output must not sit beside the regenerated inputs
        res = {}
        if inputs_manifest is not None:
            res["inputs_changed"] = self._inputs_changed(seed, dist, inputs_manifest)
        self.last_ref_ms = 0.0
        ref_sig, ref_leaves = self.reference(seed, dist)
        res["ref_call_ms"] = self.last_ref_ms
        out_sig, out_leaves = load_output(output, self.device)
        out_leaves, wrong_device = _unplace(out_leaves, self.device)
        if wrong_device:
            res["result"] = {"ok": False, "kind": "device", "message": "; ".join(wrong_device), "leaves": []}
        else:
            res["result"] = compare.compare_leaves(out_sig, out_leaves, ref_sig, ref_leaves, tol, strides)
        if want_digest:
            res["digest"] = [compare.digest(t) if _isinstance(t, _Tensor) else t for t in out_leaves]
        if want_precision and res["result"].get("ok"):
            self._evidence_begins()
            try:
                res["precision"] = precision.measure(self.model, self.task, seed, dist, self.device,
                                                     out_leaves, ref_leaves)
            except precision.Skipped as e:
                res["precision"] = {"skipped": str(e)}
            except Exception as e:  # out of memory, say: evidence is lost, never the verdict
                res["precision"] = {"skipped": "the measurement failed: %s: %s" % (type(e).__name__, str(e)[:200])}
            finally:
                self._ref_cache = []
                self._evidence_ends()
        del out_leaves
        return res

    def _inputs_changed(self, seed, dist, inputs_manifest):
        """The positions of the candidate's inputs whose bytes differ from inputs regenerated from
        the seed. A function of its own so that every tensor it made is gone when it returns: the
        loop's variables had kept the last regenerated input alive through the reference's call
        (on the H100, KernelBench's 6 GiB ReLU: four input-sized tensors in the reference's
        compare where two are needed)."""
        _, in_leaves = load_output(inputs_manifest, self.device)
        in_leaves, _ = _unplace(in_leaves, self.device)
        _, p_leaves = compare.flatten(list(inputs.make_inputs(self.task, seed, dist, self.device)))
        changed = []
        for i in range(len(p_leaves)):
            a, b = in_leaves[i] if i < len(in_leaves) else None, p_leaves[i]
            if _isinstance(b, _Tensor) and (not _isinstance(a, _Tensor) or not compare.same_bytes(a, b)):
                changed.append(i)
        return changed

    def inputs_repeat(self, seed, dist):
        """The positions of the task's inputs that differ between two calls of its get_inputs
        under one seed: none for a task whose inputs are a function of the seed, which both sides
        of an evaluation rely on (each makes its own). Both sets are made here, in the trusted
        process, one after the other: only their digests are kept, so at most one set is alive."""
        self._release()
        self._ref_cache = []
        first = self._input_digests(seed, dist)
        second = self._input_digests(seed, dist)
        n = max(len(first), len(second))
        return [i for i in range(n) if i >= len(first) or i >= len(second) or first[i] != second[i]]

    def io_bytes(self, seed, dist):
        """The bytes of the task's inputs and of its reference output for (seed, dist): what a
        trial's dumps hold where tensors travel as files. Measured here, in the trusted process,
        so that the driver can size the work folder an evaluation needs, and judge a candidate's
        report that the folder is full, without taking the candidate's word for either."""
        # Not through reference(): its outputs are samples of the sensitivity check, which this
        # call's are not.
        self._release()
        self._ref_cache = []
        args = inputs.make_inputs(self.task, seed, dist, self.device)
        nin = _tensor_bytes(compare.flatten(list(args))[1])
        nout = _tensor_bytes(compare.flatten(self._call(args))[1])
        return {"inputs_bytes": nin, "output_bytes": nout}

    def _input_digests(self, seed, dist):
        _, leaves = compare.flatten(list(inputs.make_inputs(self.task, seed, dist, self.device)))
        return [compare.digest(t) if _isinstance(t, _Tensor) else repr(t) for t in leaves]

    def validate(self, dists, seeds, tol=None):
        """Run the reference on every distribution and report whether it is usable. Whether its
        output changes with the inputs is the sensitivity check's, below, over the samples every
        reference call keeps: no output is copied here."""
        report = {"distributions": [], "warnings": []}
        for dist in dists:
            entry = {"dist": dist}
            # A reference that is not a function of its seed cannot be compared with anything:
            # say so by its cause before the repeat check reads it as nondeterminism.
            differ = self.inputs_repeat(seeds[0], dist)
            if differ:
                entry["inputs_differ"] = differ
                report["distributions"].append(entry)
                continue
            for i, s in enumerate(seeds):
                sig, leaves = self.reference(s, dist)
                nonfinite = sum(int((~torch.isfinite(t)).sum()) for t in leaves
                                if _isinstance(t, _Tensor) and t.is_floating_point())
                if nonfinite:
                    entry["nonfinite"] = entry.get("nonfinite", 0) + nonfinite
                if i == 0:
                    self._check_repeat(entry, s, dist, sig, leaves, tol)
                    if not report["distributions"]:
                        entry["output"] = [_tensor_meta(t) if _isinstance(t, _Tensor) else {"value": t} for t in leaves]
                del sig, leaves
            report["distributions"].append(entry)
            self._ref_cache = []
        # Across every distribution and seed: would an evaluation's trials tell a constant output
        # from a computed one, and if not, which distribution would it add?
        keys = [(s, d) for d in dists for s in seeds]
        report["sensitivity"] = sensitivity.check(self._samples, self._reference_timed, keys, seeds[0], tol)
        self._ref_cache = []
        return report

    def _check_repeat(self, entry, seed, dist, sig, leaves, tol):
        """Call the reference again on (seed, dist)'s input and record in entry whether it gave
        (sig, leaves) again. Usable means reproducible within the task's tolerance, the rule a
        candidate's two calls on one input are held to. Many of PyTorch's own kernels are not
        bitwise reproducible (cuDNN's transposed convolutions add with atomics): that is
        reported, not failed."""
        a_sig, a_leaves = compare.flatten(self._call(list(inputs.make_inputs(self.task, seed, dist, self.device))))
        exact = compare.compare_leaves(a_sig, a_leaves, sig, leaves, {"atol": 0, "rtol": 0})
        entry["bitwise"] = exact["ok"]
        if exact["ok"]:
            entry["deterministic"] = True
            return
        within = compare.compare_leaves(a_sig, a_leaves, sig, leaves, tol)
        entry["deterministic"] = within["ok"]
        diffs = [leaf["max_abs_err"] for leaf in exact.get("leaves", []) if "max_abs_err" in leaf]
        if diffs:
            entry["repeat_max_abs_diff"] = max(diffs)


def _compiled(model, mode):
    if not hasattr(torch, "compile"):
        raise HarnessError("torch %s has no torch.compile (needs torch >= 2.0)" % torch.__version__)
    if mode == "compile-default":
        return torch.compile(model)
    if mode == "cudagraphs":
        return torch.compile(model, backend="cudagraphs")
    if mode in ("reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        return torch.compile(model, mode=mode)
    raise HarnessError("unknown baseline mode %r" % mode)


def _storage_of(t):
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage().untyped()


def _sole_owner(t):
    """Whether t is the only tensor on its storage (no view of it lives elsewhere)."""
    use = getattr(torch._C, "_storage_Use_Count", None)
    if use is None:
        return True
    # The tensor's reference and the storage object's own.
    return use(_storage_of(t)._cdata) <= 2


def _same_places(fresh, layout):
    """Whether every tensor of fresh lies where the buffer of its position lay, with its layout."""
    if len(fresh) != len(layout):
        return False
    for f, l in zip(fresh, layout):
        if _isinstance(f, _Tensor) != (l is not None):
            return False
        if l is not None and (f.data_ptr(), f.shape, f.dtype, f.stride()) != l:
            return False
    return True


def _pairmax(a, b):
    return (max(a[0], b[0]), max(a[1], b[1]))


def _touch(t):
    """Read and write every byte of t's memory, leaving it unchanged (what a copy into it moves).
    The bytes are added to as the widest integers they divide into: byte-wise adds ran ten times
    slower than a copy on the CPU (16 ms against 0.9 ms for 31 MB)."""
    try:
        flat = t.detach().reshape(-1).view(torch.uint8)
        for wide in (torch.int64, torch.int32):
            try:
                flat = flat.view(wide)
                break
            except RuntimeError:  # a size or an offset that is not a multiple of its width
                continue
        flat.add_(0)
    except RuntimeError:
        try:
            torch.empty(0, dtype=torch.uint8, device=t.device).set_(_storage_of(t)).add_(0)
        except RuntimeError:
            pass  # a storage torch cannot view as bytes


def _fill(t, byte):
    """Overwrite a tensor's memory with one byte value, whatever its dtype and strides."""
    try:
        st = _storage_of(t)
        torch.empty(0, dtype=torch.uint8, device=t.device).set_(st).fill_(byte)
    except RuntimeError:
        pass  # a storage torch cannot view as bytes; nothing to poison


class _Placed:
    """A loaded tensor together with the device it was on in the process that wrote it."""

    def __init__(self, tensor, origin):
        self.tensor = tensor
        self.origin = origin


def _unplace(leaves, device):
    """Split loaded leaves into plain values and a message for tensors that came from the wrong device."""
    plain, wrong = [], []
    for i, x in enumerate(leaves):
        if _isinstance(x, _Placed):
            if x.origin.split(":")[0] != device.type:
                wrong.append("output %d was returned on %s, expected %s" % (i, x.origin or "?", device))
            plain.append(x.tensor)
        else:
            plain.append(x)
    return plain, wrong


def load_output(manifest, device):
    """Read a manifest written by an untrusted process; validate everything."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("sig"), str) or not isinstance(manifest.get("leaves"), list):
        raise HarnessError("malformed output manifest")
    leaves = []
    for item in manifest["leaves"]:
        if not isinstance(item, dict):
            raise HarnessError("malformed output manifest entry")
        if "ipc" in item:
            try:
                t = transport.open_ipc(item, device)
            except transport.TransportError as e:
                raise tensorfile.TensorFileError(str(e))
            leaves.append(_Placed(t, item.get("device", "") if isinstance(item.get("device"), str) else ""))
        elif "tensor" in item:
            path = item["tensor"]
            if not isinstance(path, str):
                raise HarnessError("malformed tensor path in manifest")
            t, meta = tensorfile.read(path)
            leaves.append(_Placed(t.to(device), meta.get("device", "")))
        elif "value" in item:
            v = item["value"]
            if v is not None and not isinstance(v, (bool, int, float)):
                raise HarnessError("malformed scalar in manifest")
            leaves.append(v)
        else:
            raise HarnessError("malformed output manifest entry")
    return manifest["sig"], leaves


def _tensor_bytes(leaves):
    return sum(int(t.numel()) * t.element_size() for t in leaves if _isinstance(t, _Tensor))


def error_reply(exc, phase):
    return {"ok": False, "error": describe(exc, phase)}


def collect_garbage():
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
