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


HOST = {"sum": np.add, "avg": np.add, "max": np.maximum, "min": np.minimum}  # ⊕ on NumPy


def combine(op: str, acc, incoming) -> None:
    """``acc ← acc ⊕ incoming`` in place (``avg`` sums; :func:`finish` divides)."""
    xp = get_array_module(acc)
    if op in ("sum", "avg"):
        xp.add(acc, incoming, out=acc)
    elif op == "max":
        xp.maximum(acc, incoming, out=acc)
    else:
        xp.minimum(acc, incoming, out=acc)


def finish(op: str, acc, size: int) -> None:
    """Divide by the number of ranks for ``avg``; nothing for the others."""
    if op == "avg":
        acc /= size
