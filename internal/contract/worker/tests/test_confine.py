"""The worker's own Landlock layer, on a real child process: after it, files are written only
beneath the folders it names, its own /proc entry and /dev."""

import os
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import os, sys
sys.path.insert(0, %r)
from kbpworker import confine
mine, other = sys.argv[1], sys.argv[2]
if not confine.narrow_writes([mine]):
    print("no-landlock"); sys.exit(0)
out = []
for name, path in (("mine", os.path.join(mine, "f")), ("other", os.path.join(other, "f")),
                   ("proc", "/proc/%%d/comm" %% os.getpid()), ("null", "/dev/null")):
    try:
        with open(path, "w") as f:
            f.write("kbp-test")
        out.append(name + "=ok")
    except OSError as e:
        out.append(name + "=" + e.__class__.__name__)
print(" ".join(out))
""" % HERE


def test_writes_are_narrowed():
    with tempfile.TemporaryDirectory() as mine, tempfile.TemporaryDirectory() as other:
        got = subprocess.run([sys.executable, "-c", CHILD, mine, other], capture_output=True, text=True, check=True).stdout.split()
        if got == ["no-landlock"]:
            pytest.skip("this kernel has no Landlock")
        assert got == ["mine=ok", "other=PermissionError", "proc=ok", "null=ok"], got
