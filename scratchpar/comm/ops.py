"""Reduction operators: sum, avg, max, min, applied in place so that buffers are reused."""

from __future__ import annotations

import numpy as np

from scratchpar.backend import get_array_module
from scratchpar.comm.errors import CommError

OPS = ("sum", "avg", "max", "min")


def check_op(op: str, dtype) -> None:
    """Raise :class:`CommError` for an unknown op, or ``avg`` of integers (not representable)."""
    if op not in OPS:
        raise CommError(f"reduction op must be one of {OPS}, got {op!r}")
    if op == "avg" and np.dtype(dtype).kind != "f":
        raise CommError(f"op 'avg' needs a floating dtype, got {np.dtype(dtype)}; use 'sum'")


UFUNCS = {"sum": "add", "avg": "add", "max": "maximum", "min": "minimum"}  # ⊕, by name


def ufunc(op: str, xp=np):
    """The array module's in-place-able ufunc for ``op`` (``avg`` sums; :func:`finish`
    divides): NumPy's by default, resolved once by a caller on the host's hot path."""
    return getattr(xp, UFUNCS[op])


def combine(op: str, acc, incoming) -> None:
    """``acc ← acc ⊕ incoming`` in place (``avg`` sums; :func:`finish` divides)."""
    ufunc(op, get_array_module(acc))(acc, incoming, out=acc)


def finish(op: str, acc, size: int) -> None:
    """Divide by the number of ranks for ``avg``; nothing for the others."""
    if op == "avg":
        acc /= size
