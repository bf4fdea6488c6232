"""Raw tensor files: how outputs leave an untrusted process without pickle.

A tensor is written as two files: PATH.json (dtype, shape, strides, device) and PATH.bin (the
contiguous bytes). Reading never executes anything from the file: the header is plain JSON whose
fields are validated, and the payload is mapped with torch.from_file.
"""

import json
import os

import torch

DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
}
NAMES = {v: k for k, v in DTYPES.items()}

MAX_HEADER = 1 << 20


class TensorFileError(Exception):
    pass


def dtype_name(dtype):
    try:
        return NAMES[dtype]
    except KeyError:
        raise TensorFileError("unsupported dtype %s" % dtype)


def write(path, t):
    """Write tensor t (any device) to PATH.json + PATH.bin."""
    meta = {
        "dtype": dtype_name(t.dtype),
        "shape": list(t.shape),
        "strides": list(t.stride()),
        "device": str(t.device),
        "numel": t.numel(),
    }
    binpath = path + ".bin"
    if os.path.exists(binpath):
        os.unlink(binpath)
    if t.numel() > 0:
        _allocate(binpath, t.numel() * t.element_size())
        dst = torch.from_file(binpath, shared=True, size=t.numel(), dtype=t.dtype)
        dst.copy_(t.detach().reshape(-1))
        del dst
    else:
        open(binpath, "wb").close()
    with open(path + ".json", "w") as f:
        json.dump(meta, f)
    return meta


def _allocate(binpath, nbytes):
    """Give the payload file its blocks before it is mapped. torch.from_file extends a file
    without allocating it, and a write into a mapped page the disk has no room for is not an
    error but SIGBUS (the process dies as if the kernel had crashed). Allocated first, a full
    disk is an OSError (ENOSPC) here, which the driver can judge (a full work folder is the
    platform's, not the kernel's)."""
    fd = os.open(binpath, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as e:
        os.close(fd)
        os.unlink(binpath)  # give back what was allocated: the driver measures the folder's room
        raise OSError(e.errno, e.strerror, binpath) from None
    os.close(fd)


def read_meta(path):
    try:
        size = os.path.getsize(path + ".json")
    except OSError as e:
        raise TensorFileError("missing tensor header %s.json: %s" % (path, e))
    if size > MAX_HEADER:
        raise TensorFileError("tensor header %s.json is too large" % path)
    with open(path + ".json") as f:
        try:
            meta = json.load(f)
        except ValueError as e:
            raise TensorFileError("malformed tensor header %s.json: %s" % (path, e))
    if not isinstance(meta, dict):
        raise TensorFileError("malformed tensor header %s.json" % path)
    dt = meta.get("dtype")
    if dt not in DTYPES:
        raise TensorFileError("unknown dtype %r in %s.json" % (dt, path))
    shape = meta.get("shape")
    if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise TensorFileError("bad shape in %s.json" % path)
    strides = meta.get("strides", [])
    if not isinstance(strides, list) or not all(isinstance(s, int) for s in strides):
        raise TensorFileError("bad strides in %s.json" % path)
    if not isinstance(meta.get("device", ""), str):
        raise TensorFileError("bad device in %s.json" % path)
    return meta


def read(path):
    """Return (tensor on CPU, meta). The tensor maps the payload copy-on-write."""
    meta = read_meta(path)
    dtype = DTYPES[meta["dtype"]]
    numel = 1
    for s in meta["shape"]:
        numel *= s
    itemsize = torch.empty((), dtype=dtype).element_size()
    binpath = path + ".bin"
    try:
        size = os.path.getsize(binpath)
    except OSError as e:
        raise TensorFileError("missing tensor payload %s: %s" % (binpath, e))
    if size != numel * itemsize:
        raise TensorFileError(
            "payload %s holds %d bytes, header says %d elements of %d bytes" % (binpath, size, numel, itemsize)
        )
    if numel == 0:
        return torch.empty(meta["shape"], dtype=dtype), meta
    t = torch.from_file(binpath, shared=False, size=numel, dtype=dtype)
    return t.view(meta["shape"]), meta


def remove(path):
    for suffix in (".json", ".bin"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass
