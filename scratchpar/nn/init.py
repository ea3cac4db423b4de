"""Weight initialization: Xavier/Glorot (2010) and Kaiming/He (2015), drawn on the host."""

from __future__ import annotations

import math

import numpy as np

from ..backend import to_device


def xavier_uniform(gen: np.random.Generator, fan_in: int, fan_out: int, shape, dtype):
    """U(−a, a), a = √(6 / (fan_in + fan_out)): Glorot & Bengio 2010, eq. 16."""
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    return to_device(gen.uniform(-bound, bound, size=shape), dtype=dtype)


def xavier_normal(gen: np.random.Generator, fan_in: int, fan_out: int, shape, dtype):
    """N(0, 2 / (fan_in + fan_out)): the normal form of Glorot & Bengio 2010."""
    std = math.sqrt(2.0 / (fan_in + fan_out))
    return to_device(gen.normal(0.0, std, size=shape), dtype=dtype)


def kaiming_uniform(gen: np.random.Generator, fan_in: int, shape, dtype):
    """U(−a, a), a = √(6 / fan_in): He et al. 2015, eq. 10, for ReLU layers."""
    bound = math.sqrt(6.0 / fan_in)
    return to_device(gen.uniform(-bound, bound, size=shape), dtype=dtype)
