"""Mapping exceptions to the contract's error classes."""

import errno
import re
import traceback

from .extcache import CompileError

MEMORY_FAULTS = (
    "illegal memory access",
    "misaligned address",
    "unspecified launch failure",
    "illegal instruction",
    "invalid program counter",
    "device-side assert",  # e.g. an out-of-range index inside a device kernel
)

MAX_MESSAGE = 8000

# Triton's exceptions for a kernel that cannot be built for the GPU (triton.runtime.errors and
# triton.backends.nvidia): raised at the first launch, they are compile failures.
TRITON_BUILD_ERRORS = ("OutOfResources", "PTXASError", "CompileTimeAssertionFailure")


class LoadError(Exception):
    """The candidate module cannot be used: syntax error, import failure, no ModelNew."""


class HarnessError(Exception):
    """The harness configuration is wrong (not the candidate's fault)."""


class TaskError(Exception):
    """The task's own file does not load or lacks what the format needs: the task's failure
    (reference_error), never the candidate's or the platform's. Only the driver decides whom to
    believe: from a process that ran candidate code it is confirmed by the reference first."""


def classify(exc, phase):
    """Return the error class for an exception raised in phase ('load', 'init', 'call')."""
    if isinstance(exc, CompileError):
        return "compile_error"
    mod = type(exc).__module__ or ""
    name = type(exc).__name__
    if mod.startswith("triton") and ("compil" in (name + mod).lower() or name in TRITON_BUILD_ERRORS):
        # Triton builds a kernel at its first launch: a kernel that cannot be built for this GPU
        # (its shared memory or registers do not fit, ptxas refuses it) failed to compile, whenever
        # that shows.
        return "compile_error"
    text = str(exc).lower()
    if type(exc).__name__ == "OutOfMemoryError" or "out of memory" in text:
        return "resource"
    if any(m in text for m in MEMORY_FAULTS):
        return "illegal_memory_access"
    if isinstance(exc, LoadError) or (phase == "load" and isinstance(exc, (SyntaxError, ImportError))):
        return "load_error"
    if phase == "load":
        return "load_error"
    return "runtime_error"


def useful_message(exc):
    """The part of an exception message a kernel author needs: compiler errors first."""
    text = str(exc)
    if isinstance(exc, CompileError):
        lines = text.splitlines()
        keep = []
        for i, line in enumerate(lines):
            if re.search(r"\berror\b|error:|undefined reference|fatal", line, re.I):
                keep.extend(lines[max(0, i - 1): i + 3])
        if keep:
            seen, dedup = set(), []
            for line in keep:
                if line not in seen:
                    seen.add(line)
                    dedup.append(line)
            text = "\n".join(dedup[:60])
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE] + "\n... (truncated)"
    return "%s: %s" % (type(exc).__name__, text)


# A write that found no room: the driver judges whose fault that is (a full work folder is the
# platform's; a kernel that filled its own folder, or only says so, is not).
DISK_FULL = {errno.ENOSPC: "ENOSPC", errno.EDQUOT: "EDQUOT"}


def disk_full(exc):
    """The errno name of the full disk behind exc (it, or what it was raised from), or None."""
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, OSError) and exc.errno in DISK_FULL:
            return DISK_FULL[exc.errno]
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def describe(exc, phase):
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if len(tb) > 4 * MAX_MESSAGE:
        tb = tb[-4 * MAX_MESSAGE:]
    body = {
        "class": classify(exc, phase),
        "phase": phase,
        "type": type(exc).__name__,
        "message": useful_message(exc),
        "traceback": tb,
    }
    full = disk_full(exc)
    if full:
        body["errno"] = full
    return body
