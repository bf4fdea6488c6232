"""Bootstrap for the contract worker: python3 -B run.py {reference|candidate}.

The process the driver starts is a shepherd. On Linux it makes itself the subreaper of everything
below it (prctl PR_SET_CHILD_SUBREAPER), forks the worker, reaps whatever ends below it, and when
the worker ends it kills what the worker left behind and exits as the worker did (same status, same
signal). A helper process the candidate starts can leave the process group (setsid) and lose its
parent, but it cannot leave this process's tree: the driver finds it there, to stop it while the
other side is timed and to kill it with the worker. The shepherd imports nothing of the worker and
runs no candidate code.
"""

import os
import signal
import sys
import time

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _descendants(root):
    """(pid, state) of every process below root, from /proc."""
    kids = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
            fields = stat[stat.rindex(b")") + 2:].split()
            kids.setdefault(int(fields[1]), []).append((int(name), fields[0]))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    out, todo = [], [root]
    while todo:
        for pid, state in kids.get(todo.pop(), ()):
            out.append((pid, state))
            todo.append(pid)
    return out


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _end_leftovers():
    """SIGKILL every live process below the shepherd until none is left."""
    me = os.getpid()
    for _ in range(1000):
        live = [pid for pid, state in _descendants(me) if state not in (b"Z", b"X")]
        if not live:
            break
        for pid in live:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _reap()
        time.sleep(0.002)
    _reap()


def _shepherd():
    """Returns in the worker (forked child); never returns in the shepherd. Returns at once
    where the platform has no subreaper (the worker then runs in this process)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    me = os.getpid()

    def _driver_gone(signum, frame):
        # The driver died (its parent-death signal, SIGTERM, set when it started this process):
        # end everything below, which may include processes the worker started that left its
        # group, then go.
        _end_leftovers()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, _driver_gone)
    worker = os.fork()
    if worker == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        # The worker dies with the shepherd (which dies with the driver).
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != me:
            os._exit(1)
        return
    # The worker's channels are its own: closed here, a dead worker's pipes read as ended.
    for var in ("KBP_CMD_FD", "KBP_RES_FD", "KBP_CLOCK_FD"):
        fd = os.environ.get(var)
        if fd and fd.isdigit():
            try:
                os.close(int(fd))
            except OSError:
                pass
    status = 0
    while True:
        try:
            pid, st = os.wait()
        except ChildProcessError:
            break
        if pid == worker:
            status = st
            break
    _end_leftovers()
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # their handlers cannot be set (or changed)
            signal.signal(sig, signal.SIG_DFL)
        os.kill(me, sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    _shepherd()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    # The worker narrows what it may write before it imports torch (kbpworker/confine.py).
    from kbpworker import confine  # noqa: E402

    confine.narrow_writes(os.environ.get("KBP_WRITABLE", "").split(os.pathsep))
    from kbpworker.__main__ import main  # noqa: E402

    sys.exit(main(sys.argv))
