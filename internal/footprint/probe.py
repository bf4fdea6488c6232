"""Estimate the memory a task's inputs, parameters and outputs take, without allocating them.

Reads JSON lines {"id": ..., "path": ...} on stdin and prints one JSON line per task. The task
module runs with torch's tensor factories redirected to the meta device, so shapes and dtypes are
real and no memory is taken; its Model's forward runs on the meta inputs when torch can (else the
output is estimated as the largest input).
"""
import importlib.util
import json
import sys

import torch

FACTORIES = ["randn", "rand", "randint", "zeros", "ones", "empty", "full", "arange", "linspace",
             "logspace", "randperm", "eye", "normal", "empty_strided", "tensor", "as_tensor"]


def nbytes(v):
    if isinstance(v, torch.Tensor):
        return v.numel() * v.element_size()
    if isinstance(v, (list, tuple)):
        return sum(nbytes(x) for x in v)
    if isinstance(v, dict):
        return sum(nbytes(x) for x in v.values())
    return 0


def largest(v):
    if isinstance(v, torch.Tensor):
        return nbytes(v)
    if isinstance(v, (list, tuple)):
        return max([largest(x) for x in v] or [0])
    return 0


class MetaFactories:
    """Redirects torch's factories to the meta device while the task's code runs."""

    def __enter__(self):
        self.saved = {}
        for name in FACTORIES:
            fn = getattr(torch, name, None)
            if fn is None:
                continue
            self.saved[name] = fn

            def meta(*args, _fn=fn, _name=name, **kwargs):
                if _name in ("tensor", "as_tensor"):
                    return _fn(*args, **kwargs)  # small literals: keep them real
                kwargs["device"] = "meta"
                return _fn(*args, **kwargs)
            setattr(torch, name, meta)
        return self

    def __exit__(self, *exc):
        for name, fn in self.saved.items():
            setattr(torch, name, fn)


def probe(path):
    spec = importlib.util.spec_from_file_location("kbp_probe_task", path)
    mod = importlib.util.module_from_spec(spec)
    out = {"inputs_bytes": 0, "params_bytes": 0, "output_bytes": 0, "output_known": False}
    with MetaFactories():
        spec.loader.exec_module(mod)
        inputs = mod.get_inputs()
        out["inputs_bytes"] = nbytes(inputs)
        init = mod.get_init_inputs() if hasattr(mod, "get_init_inputs") else []
        try:
            model = mod.Model(*init)
            out["params_bytes"] = sum(nbytes(p) for p in model.parameters()) + sum(nbytes(b) for b in model.buffers())
            res = model(*inputs)
            out["output_bytes"] = nbytes(res)
            out["output_known"] = True
        except Exception as e:  # noqa: BLE001 - the estimate falls back, the contract reports errors
            out["note"] = "forward not traced on the meta device (%s); output taken as the largest input" % type(e).__name__
            out["output_bytes"] = largest(inputs)
    return out


def main():
    for line in sys.stdin:
        req = json.loads(line)
        try:
            res = probe(req["path"])
        except Exception as e:  # noqa: BLE001
            res = {"error": "%s: %s" % (type(e).__name__, e)}
        res["id"] = req["id"]
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
