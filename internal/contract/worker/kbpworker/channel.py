"""The command channel between the trusted Go driver and this worker.

Commands arrive as one JSON object per line on the file descriptor named by KBP_CMD_FD; replies
leave on KBP_RES_FD. Both descriptors are created by the driver and inherited; stdout and stderr
are never read as results (the driver keeps them as a bounded log).
"""

import json
import math
import os


def jsonable(obj):
    """Replace non-finite floats, which JSON cannot carry, by the strings "inf", "-inf" and "nan".

    A wrong output can make an error statistic overflow (a huge difference over a zero reference);
    that must reach the driver as a description, not crash the process that computed it."""
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj


class Channel:
    def __init__(self, cmd_fd, res_fd):
        self._cmd = os.fdopen(cmd_fd, "rb", buffering=0)
        self._res_fd = res_fd
        self._buf = b""
        self._write = os.write  # captured: the candidate may replace os.write later

    @classmethod
    def from_env(cls):
        return cls(int(os.environ["KBP_CMD_FD"]), int(os.environ["KBP_RES_FD"]))

    def recv(self):
        """Return the next command, or None at end of input."""
        while b"\n" not in self._buf:
            chunk = self._cmd.read(65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def send(self, msg):
        data = (json.dumps(jsonable(msg), separators=(",", ":"), allow_nan=False) + "\n").encode()
        view = memoryview(data)
        while view:
            n = self._write(self._res_fd, view)
            view = view[n:]


class Clock:
    """The clock channel: one datagram per mark, "A<seq>" right before a timed region starts and
    "D<seq>" right after it ends. The driver's end has kernel timestamps on, so each mark is
    stamped by the kernel when this process sends it."""

    def __init__(self, fd):
        self._fd = fd
        self._write = os.write  # captured, like the reply channel's

    @classmethod
    def from_env(cls):
        fd = os.environ.get("KBP_CLOCK_FD")
        return cls(int(fd)) if fd else None

    def mark(self, kind, seq):
        self._write(self._fd, b"%s%d" % (kind, seq))
