"""A second Landlock layer, applied by the worker to itself before anything of torch or the
candidate is imported: it may write files only in its own folders, in its own /proc entry and in
/dev (where the first layer allows only the devices it names).

The first layer is the sandbox helper's (internal/sandbox), applied before Python started. On a
GPU it must let the worker write under /proc: CUDA's initialisation names its threads through
/proc/<pid>/task/<tid>/comm and fails without it (error 304). The helper cannot name that folder,
since the worker is a process the shepherd forks later, so it allows writing under all of /proc;
this layer, made by the worker once it exists, narrows that to the worker's own entry (and
everything else to what it already was). Layers only ever take rights away: nothing here can widen
the first layer. Standard library only."""

import ctypes
import os

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_WRITE_FILE = 1 << 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_O_PATH = getattr(os, "O_PATH", 0o10000000)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def narrow_writes(paths):
    """Allow this process (and what it starts) to write files only beneath paths, its own /proc
    entry and /dev. Returns False where the kernel has no Landlock (nothing to narrow); raises
    OSError when a layer could not be applied where Landlock exists."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    attr = _RulesetAttr(_WRITE_FILE)
    fd = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    if fd < 0:
        return False
    fd = int(fd)
    try:
        for p in [x for x in paths if x] + ["/proc/%d" % os.getpid(), "/dev"]:
            try:
                pfd = os.open(p, _O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a folder that does not exist needs no right
            try:
                rule = _PathBeneath(_WRITE_FILE, pfd)
                if libc.syscall(_ADD_RULE, fd, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    raise OSError(ctypes.get_errno(), "landlock_add_rule %s" % p)
            finally:
                os.close(pfd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "no_new_privs")
        if libc.syscall(_RESTRICT_SELF, fd, ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(fd)
    return True
