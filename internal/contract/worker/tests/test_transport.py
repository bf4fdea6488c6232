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
