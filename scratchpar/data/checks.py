"""Argument checks shared by the datasets: clear ValueErrors before any data is made."""

from __future__ import annotations

import math

import numpy as np


def check_int(name: str, value, minimum: int) -> int:
    """``value`` as a Python int; a ValueError naming ``name`` unless it is one ``>= minimum``."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_positive(name: str, value) -> float:
    """``value`` as a float, or a ValueError naming ``name`` if it is not finite and ``> 0``."""
    if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {value}")
    return float(value)


def check_fraction(name: str, value) -> float:
    """``value`` as a float, or a ValueError naming ``name`` unless ``0 < value <= 1``."""
    value = check_positive(name, value)
    if value > 1:
        raise ValueError(f"{name} must be at most 1, got {value}")
    return value


def check_step(step, batch_size) -> tuple[int, int]:
    """A data position is a step ``>= 0``; a batch has at least one row."""
    return check_int("step", step, 0), check_int("batch_size", batch_size, 1)


def check_rows(rows, batch_size: int) -> tuple[int, int]:
    """``rows``, ``(start, stop)`` of a batch of ``batch_size`` rows (``None``: all of them),
    checked: ``0 <= start <= stop <= batch_size``."""
    if rows is None:
        return 0, batch_size
    start, stop = (check_int("rows' start", rows[0], 0), check_int("rows' stop", rows[1], 0))
    if not start <= stop <= batch_size:
        raise ValueError(f"rows {start}..{stop} are not within a batch of {batch_size} rows")
    return start, stop


def cut(arrays: tuple, start: int, stop: int, batch_size: int) -> tuple:
    """Rows ``start … stop`` of a batch drawn whole: copies, so that the whole batch is
    freed (a source whose rows cannot be drawn alone)."""
    if (start, stop) == (0, batch_size):
        return arrays
    return tuple(a[start:stop].copy() for a in arrays)
