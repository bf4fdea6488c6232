"""What this process runs on: the software and device half of an evaluation's fingerprint.

The driver adds what Python cannot see reliably (driver version, clocks, CPU model).
"""

import os
import platform
import sys

import torch


def preload():
    """Import what collect reads, so that a spare process pays for it before its hello."""
    try:
        import triton  # noqa: F401
    except Exception:
        pass


def collect(device):
    fp = {
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "torch": torch.__version__,
        "torch_cuda": getattr(torch.version, "cuda", None) or "",
        "cudnn": "",
        "triton": "",
        "device": str(device),
        "device_name": platform.processor() or platform.machine(),
        "cpu_threads": torch.get_num_threads(),
        "torch_compile": hasattr(torch, "compile"),
    }
    try:
        import triton  # noqa: F401  (only its version is read)

        fp["triton"] = getattr(triton, "__version__", "")
    except Exception:
        pass
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        fp.update(
            device_name=props.name,
            compute_capability="%d.%d" % (props.major, props.minor),
            sm_count=props.multi_processor_count,
            device_memory_bytes=props.total_memory,
        )
        # The GPU's own identity, so the driver can check it described the same GPU (torch 2.x
        # has it; 1.13 does not).
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            fp["device_uuid"] = str(uuid)
        # The allocator options the process ran with (the driver turns some off: allocconf.go);
        # they change how memory is laid out and reused, so a record says which were in force.
        fp["cuda_alloc_conf"] = " ".join("%s=%s" % (v, os.environ[v]) for v in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
                                         if os.environ.get(v))
        try:
            fp["cudnn"] = str(torch.backends.cudnn.version() or "")
        except Exception:
            pass
    return fp
