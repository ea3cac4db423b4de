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


def check_step(step, batch_size) -> tuple[int, int]:
    """A data position is a step ``>= 0``; a batch has at least one row."""
    return check_int("step", step, 0), check_int("batch_size", batch_size, 1)
