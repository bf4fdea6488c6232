"""How a candidate's tensors reach the trusted reference process.

On a GPU, an output stays where the candidate computed it: the candidate exports a CUDA IPC
handle of the tensor's memory, and the reference process maps that memory and compares it in
place while the driver keeps the candidate's whole process tree stopped. Nothing is copied to the
host: a 6.4 GB output costs a mapping, not 6.4 GB of tmpfs and two copies across PCIe. Every field
of an exported descriptor comes from an untrusted process, so the reading side validates it all,
and checks with the CUDA driver that the tensor lies inside the memory the handle maps.

On the CPU (and wherever IPC is not available) tensors travel as raw files (tensorfile).
"""

import base64
import ctypes
import re

import torch

from . import tensorfile

# torch's IPC reference-counter files are named /torch_<pid>_<random>[_<n>] and hold this many
# int64 slots (torch/csrc/CudaIPCTypes.h, CUDA_IPC_REF_COUNTER_FILE_SIZE).
_REF_COUNTER_NAME = re.compile(r"^/torch_[0-9_]{1,64}$")
_REF_COUNTER_SLOTS = 10000
_MAX_HANDLE = 256


class TransportError(Exception):
    """A descriptor that does not describe a tensor the exporting process owns."""


def _storage(t):
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage().untyped()


# torch >= 2.2 prefixes an exported handle with its format's version and the kind of memory it
# names: b"c" a cudaMalloc allocation (then the driver's 64-byte handle), b"e" an expandable
# segment (page handles that the reading side would map one by one; c10/cuda/
# CUDACachingAllocator.cpp, shareIpcHandle). Older releases export the bare 64-byte handle.
_CUDA_IPC_HANDLE_SIZE = 64


def handle_kind(handle):
    """"cudaMalloc" or "expandable" for a handle torch exported, "" for neither."""
    if len(handle) == _CUDA_IPC_HANDLE_SIZE:
        return "cudaMalloc"
    kind = handle[1:2]
    if kind == b"c" and len(handle) == _CUDA_IPC_HANDLE_SIZE + 2:
        return "cudaMalloc"
    if kind == b"e":
        return "expandable"
    return ""


def _native_allocator():
    """Whether this process allocates through torch's own caching allocator, whose blocks can be
    exported (the cudaMallocAsync backend cannot export them)."""
    backend = getattr(torch._C, "_cuda_getAllocatorBackend", None)
    try:
        return backend is None or backend() == "native"
    except RuntimeError:
        return False


def export(t, base, ipc):
    """Describe tensor t for the reference process: an IPC descriptor when ipc is set and t is on a
    GPU, else a raw file written under base.

    Only cudaMalloc memory goes by IPC: the reference bounds-checks a mapped tensor against the one
    allocation its handle maps, which an expandable segment, mapped page by page, does not pass.
    The driver starts the workers with expandable segments off (allocconf.go); memory that is in
    one all the same (a kernel that turned them on) travels as a file, as on the CPU; torch keeps
    a block it has shared out of reuse until a reader lets go, so that kernel's process pays for
    each such output with memory it does not get back."""
    if ipc and t.is_cuda and _native_allocator():
        dev, handle, size, offset, rc_handle, rc_offset, ev_handle, ev_sync = _storage(t)._share_cuda_()
        if handle_kind(handle) == "cudaMalloc":
            return {
                "ipc": {
                    "handle": base64.b64encode(handle).decode(),
                    "size": int(size),
                    "offset": int(offset),
                    "ref_counter": rc_handle.decode() if isinstance(rc_handle, bytes) else str(rc_handle),
                    "ref_counter_offset": int(rc_offset),
                    "event": base64.b64encode(ev_handle).decode() if ev_handle else "",
                    "event_sync": bool(ev_sync),
                },
                "dtype": tensorfile.dtype_name(t.dtype),
                "shape": list(t.shape),
                "strides": list(t.stride()),
                "storage_offset": int(t.storage_offset()),
                "device": str(t.device),
            }
    meta = tensorfile.write(base, t)
    return {"tensor": base, "device": meta["device"]}


def ipc_available():
    """Whether this process can map and bounds-check IPC tensors (a GPU and the CUDA driver)."""
    return torch.cuda.is_available() and _driver() is not None


_drv = []


def _driver():
    if not _drv:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            f = lib.cuMemGetAddressRange_v2
            f.restype = ctypes.c_int
            f.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
            _drv.append(f)
        except (OSError, AttributeError):
            _drv.append(None)
    return _drv[0]


def _int(d, key, lo=0, hi=1 << 62):
    v = d.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < lo or v > hi:
        raise TransportError("bad %s in IPC descriptor" % key)
    return v


def _b64(d, key, allow_empty=False):
    v = d.get(key)
    if not isinstance(v, str) or len(v) > 2 * _MAX_HANDLE:
        raise TransportError("bad %s in IPC descriptor" % key)
    try:
        raw = base64.b64decode(v, validate=True)
    except (ValueError, TypeError):
        raise TransportError("bad %s in IPC descriptor" % key)
    if not raw and not allow_empty:
        raise TransportError("empty %s in IPC descriptor" % key)
    return raw


def open_ipc(item, device):
    """Map the tensor an IPC descriptor names; raise TransportError unless it is well formed and
    lies inside memory the handle maps."""
    d = item.get("ipc")
    if not isinstance(d, dict) or not isinstance(item.get("dtype"), str) or item["dtype"] not in tensorfile.DTYPES:
        raise TransportError("malformed IPC descriptor")
    shape, strides = item.get("shape"), item.get("strides")
    if not isinstance(shape, list) or not isinstance(strides, list) or len(shape) != len(strides):
        raise TransportError("bad shape or strides in IPC descriptor")
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape + strides):
        raise TransportError("bad shape or strides in IPC descriptor")
    if device.type != "cuda":
        raise TransportError("IPC descriptor on a %s worker" % device.type)
    dtype = tensorfile.DTYPES[item["dtype"]]
    itemsize = torch.empty((), dtype=dtype).element_size()
    handle = _b64(d, "handle")
    kind = handle_kind(handle)
    if kind != "cudaMalloc":
        # An expandable segment's handle carries page handles for torch to map one by one, which
        # cannot be bounds-checked as one allocation; the harness never sends one.
        raise TransportError("IPC handle of %s memory (only cudaMalloc allocations are mapped)" % (kind or "unknown"))
    event = _b64(d, "event", allow_empty=True)
    size = _int(d, "size", 1)
    offset = _int(d, "offset")
    rc_offset = _int(d, "ref_counter_offset", 0, _REF_COUNTER_SLOTS - 1)
    rc = d.get("ref_counter")
    if not isinstance(rc, str) or not _REF_COUNTER_NAME.match(rc):
        raise TransportError("bad ref_counter in IPC descriptor")
    toff = _int(item, "storage_offset")
    numel = 1
    for s in shape:
        numel *= s
    last = toff + sum((n - 1) * st for n, st in zip(shape, strides)) if numel else toff
    need = (last + 1) * itemsize if numel else 0
    if need > size:
        raise TransportError("IPC tensor reaches past its storage (%d > %d bytes)" % (need, size))
    try:
        storage = torch.UntypedStorage._new_shared_cuda(
            device.index or 0, handle, size, offset, rc.encode(), rc_offset, event, bool(d.get("event_sync")))
    except Exception as e:  # noqa: BLE001 - any failure to open is the descriptor's fault
        raise TransportError("cannot open IPC handle: %s" % e)
    # The storage's deleter gives the producer's reference back (it decrements the counter once,
    # when this side frees it), exactly as torch's own consumer on a first receive. Releasing it
    # here as well would count it twice: the counter would pass zero and the producer would keep
    # every exported block in its IPC limbo for good (measured: 24 outputs held by the candidate).
    f = _driver()
    if f is None:
        raise TransportError("cannot bounds-check IPC memory without the CUDA driver")
    base, span = ctypes.c_uint64(), ctypes.c_size_t()
    ptr = storage.data_ptr()
    if f(ctypes.byref(base), ctypes.byref(span), ctypes.c_uint64(ptr)) != 0:
        raise TransportError("IPC memory is not mapped")
    if ptr + size > base.value + span.value:
        raise TransportError("IPC storage (%d bytes) reaches past the mapped allocation" % size)
    t = torch.empty((0,), dtype=dtype, device=device)
    t.set_(storage, toff, shape, strides)
    return t
