"""Fused kernels for the GPU: each op that the engine runs as several array operations (a
layer norm's mean, variance, scale and shift; attention's scale, mask and softmax; GELU's nine
steps; a dropout mask's hash and its product) as one CUDA kernel each way, the same equations.

NumPy keeps the plain ops a reader learns from (``autograd/ops_nn.py``, ``ops_math.py``). The
fused ops (``autograd/ops_fused.py``) are those ops' subclasses: on CuPy arrays they launch the
kernels of this package; on NumPy and on the device double they run their plain parent's code,
so that CI checks everything but the kernels' own source. Which ops are fused is one switch,
``SCRATCHPAR_FUSED`` or :func:`use`:

- ``off`` (the default until a GPU has run them): the plain ops everywhere;
- ``gpu``: the fused ops on CuPy arrays, the plain ops elsewhere;
- ``on``: the fused ops everywhere (on the CPU, their plain parents' code: a check of the
  wiring, not a speed-up).
"""

from __future__ import annotations

import contextlib
import os

from ..backend import BackendError

MODES = ("off", "gpu", "on")


class KernelError(BackendError):
    """A switch this package does not know (a bad input: the training command reports it)."""


def _mode(value: str, what: str = "the fused ops' mode") -> str:
    if value not in MODES:
        raise KernelError(f"{what} must be one of {', '.join(MODES)}; got {value!r}")
    return value


_using: str | None = None  # read from the environment at the first question


def mode() -> str:
    """The switch: ``SCRATCHPAR_FUSED`` until :func:`use` sets it."""
    global _using
    if _using is None:
        _using = _mode(os.environ.get("SCRATCHPAR_FUSED", "off"), "SCRATCHPAR_FUSED")
    return _using


def use(setting: str) -> str:
    """Switch the fused ops ``off``, on for the ``gpu``'s arrays, or ``on`` everywhere; returns
    the mode before."""
    global _using
    before, _using = mode(), _mode(setting)
    return before


@contextlib.contextmanager
def using(setting: str):
    """The fused ops switched to ``setting`` inside the block, as they were after it."""
    before = use(setting)
    try:
        yield
    finally:
        use(before)


def fused(x) -> bool:
    """Whether an op on array ``x`` runs its fused version."""
    using = _using or mode()
    return using == "on" or (using == "gpu" and on_gpu(x))


def on_gpu(*arrays) -> bool:
    """Whether every array is CuPy's, contiguous, of a dtype the kernels take: only then do the
    fused ops launch a kernel rather than run their plain parent's code."""
    return all(type(a).__module__.startswith("cupy") and a.flags.c_contiguous
               and a.dtype.char in "efd" for a in arrays)
