"""Which input distributions tell a task's outputs apart: the probe behind the trials an
evaluation adds to every task (the driver's probe.go).

KernelBench draws every input with torch.rand, in [0, 1). On such inputs ReLU is the identity, and
so is every operation that differs only on negative inputs or beyond [0, 1) (LeakyReLU, HardTanh,
clamps, abs): a kernel that forgets the operation passes every trial. The reference is run under
each distribution of inputs.SIGN_PROBES; one is kept when the reference does not raise under it,
its output stays finite, and the output differs from the one on the task's own inputs for the same
seed (a distribution that changes nothing can catch nothing). The outputs are compared at the
positions the reference's samples keep (sensitivity.Samples): the same random positions for
outputs of one size, so no output is copied whole."""

from . import compare
from .errors import useful_message


def changes(base, other, tol):
    """Whether the sampled output other differs from base beyond the tolerance (or in structure).
    Either missing (an output the samples could not keep) counts as a change: the trial the
    driver adds then costs a call and can only catch more."""
    if base is None or other is None:
        return True
    return not compare.compare_leaves(other[0], other[1], base[0], base[1], tol)["ok"]


def describe(exc):
    """One line for a reference that raised under a distribution."""
    return "%s: %s" % (type(exc).__name__, useful_message(exc))
