import json

import pytest
import torch

from kbpworker import tensorfile


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.float64])
def test_round_trip(tmp_path, dtype):
    t = (torch.randn(3, 5) * 10).to(dtype)
    base = str(tmp_path / "x")
    meta = tensorfile.write(base, t)
    assert meta["shape"] == [3, 5]
    back, meta2 = tensorfile.read(base)
    assert back.dtype == dtype and torch.equal(back, t)


def test_non_contiguous_and_empty(tmp_path):
    t = torch.randn(4, 6).t()
    tensorfile.write(str(tmp_path / "a"), t)
    back, meta = tensorfile.read(str(tmp_path / "a"))
    assert torch.equal(back, t) and meta["strides"] == [1, 6]
    tensorfile.write(str(tmp_path / "e"), torch.empty(0, 3))
    back, _ = tensorfile.read(str(tmp_path / "e"))
    assert back.shape == (0, 3)


def test_rejects_forged_headers(tmp_path):
    base = str(tmp_path / "f")
    tensorfile.write(base, torch.randn(4))
    with open(base + ".json", "w") as f:
        json.dump({"dtype": "float32", "shape": [8]}, f)  # claims more than the payload holds
    with pytest.raises(tensorfile.TensorFileError):
        tensorfile.read(base)
    with open(base + ".json", "w") as f:
        json.dump({"dtype": "object", "shape": [4]}, f)
    with pytest.raises(tensorfile.TensorFileError):
        tensorfile.read(base)
    with open(base + ".json", "w") as f:
        f.write("not json")
    with pytest.raises(tensorfile.TensorFileError):
        tensorfile.read(base)
    with pytest.raises(tensorfile.TensorFileError):
        tensorfile.read(str(tmp_path / "missing"))
