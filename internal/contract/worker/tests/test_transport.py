import base64

import pytest
import torch

from kbpworker import harness, tensorfile, transport


def descriptor(**over):
    d = {
        "ipc": {"handle": base64.b64encode(b"x" * 64).decode(), "size": 4096, "offset": 0,
                "ref_counter": "/torch_123_456_0", "ref_counter_offset": 0, "event": "", "event_sync": False},
        "dtype": "float32", "shape": [4, 8], "strides": [8, 1], "storage_offset": 0, "device": "cuda:0",
    }
    for k, v in over.items():
        if k in d["ipc"]:
            d["ipc"][k] = v
        else:
            d[k] = v
    return d


@pytest.mark.parametrize("bad, why", [
    (dict(dtype="float128"), "malformed"),
    (dict(shape=[4, -1]), "shape"),
    (dict(shape=[4, 8], strides=[8]), "shape or strides"),
    (dict(strides=[8, True]), "shape or strides"),
    (dict(ref_counter="../../etc/passwd"), "ref_counter"),
    (dict(ref_counter_offset=10 ** 6), "ref_counter_offset"),
    (dict(size=0), "size"),
    (dict(handle="not base64!"), "handle"),
    (dict(storage_offset=1000), "reaches past its storage"),
    (dict(shape=[64, 64], strides=[64, 1]), "reaches past its storage"),
])
def test_untrusted_ipc_descriptors_are_refused(bad, why):
    """Every field comes from the candidate's process: a descriptor that is malformed or reaches
    past the storage it claims is refused before any handle is opened."""
    with pytest.raises(transport.TransportError, match=why):
        transport.open_ipc(descriptor(**bad), torch.device("cuda", 0))


def test_ipc_descriptor_on_a_cpu_worker_is_refused():
    with pytest.raises(transport.TransportError, match="cpu worker"):
        transport.open_ipc(descriptor(), torch.device("cpu"))
    # Through the manifest reader, that is an unreadable output (tampering for the driver).
    with pytest.raises(tensorfile.TensorFileError):
        harness.load_output({"sig": "T", "leaves": [descriptor()]}, torch.device("cpu"))


def test_handle_kinds():
    raw = b"\x07" * 64
    assert transport.handle_kind(raw) == "cudaMalloc"  # torch before 2.2: the driver's handle alone
    assert transport.handle_kind(b"\x02c" + raw) == "cudaMalloc"
    assert transport.handle_kind(b"\x02e" + b"\x00" * 20) == "expandable"
    assert transport.handle_kind(b"\x02c" + raw + b"x") == ""
    assert transport.handle_kind(b"\x02z" + raw) == ""


@pytest.mark.parametrize("handle, why", [
    (b"\x02e" + b"\x00" * 40, "expandable memory"),
    (b"\x02q" + b"\x00" * 64, "unknown memory"),
])
def test_ipc_handles_of_memory_other_than_one_allocation_are_refused(handle, why):
    with pytest.raises(transport.TransportError, match=why):
        transport.open_ipc(descriptor(handle=base64.b64encode(handle).decode()), torch.device("cuda", 0))


class _OnGPU:
    """What export reads of a CUDA tensor, for a process without one."""
    is_cuda = True
    dtype = torch.float32
    shape = torch.Size([2, 3])
    device = "cuda:0"

    def stride(self):
        return (3, 1)

    def storage_offset(self):
        return 0


@pytest.mark.parametrize("handle, by_ipc", [
    (b"\x02c" + b"\x07" * 64, True),
    (b"\x07" * 64, True),
    (b"\x02e" + b"\x00" * 40, False),  # an expandable segment (a kernel turned them on): a file
])
def test_only_cudamalloc_memory_is_exported_by_ipc(monkeypatch, handle, by_ipc):
    class Storage:
        def _share_cuda_(self):
            return (0, handle, 24, 0, b"/torch_1_2", 0, b"", False)

    written = []
    monkeypatch.setattr(transport, "_storage", lambda t: Storage())
    monkeypatch.setattr(transport, "_native_allocator", lambda: True)
    monkeypatch.setattr(transport.tensorfile, "write", lambda base, t: written.append(base) or {"device": "cuda:0"})
    d = transport.export(_OnGPU(), "/dev/shm/out.0", True)
    if by_ipc:
        assert base64.b64decode(d["ipc"]["handle"]) == handle and written == []
    else:
        assert d == {"tensor": "/dev/shm/out.0", "device": "cuda:0"} and written == ["/dev/shm/out.0"]


def test_an_allocator_that_cannot_export_sends_files(monkeypatch):
    """Under the cudaMallocAsync backend no block can be exported: outputs go as files."""
    monkeypatch.setattr(transport, "_native_allocator", lambda: False)
    monkeypatch.setattr(transport, "_storage", lambda t: pytest.fail("shared a block of another allocator"))
    monkeypatch.setattr(transport.tensorfile, "write", lambda base, t: {"device": "cuda:0"})
    assert transport.export(_OnGPU(), "/dev/shm/out.1", True) == {"tensor": "/dev/shm/out.1", "device": "cuda:0"}
