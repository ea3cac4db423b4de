"""Weight initialization: Xavier/Glorot (2010), Kaiming/He (2015), orthogonal (Saxe et al.
2014) and constants, drawn on the host in construction order; under ``nn.deferred()`` each
returns a stand-in that draws the same values later (:mod:`~scratchpar.nn.unfilled`)."""

from __future__ import annotations

import math

import numpy as np

from .unfilled import drawn


def xavier_uniform(gen: np.random.Generator, fan_in: int, fan_out: int, shape, dtype):
    """U(−a, a), a = √(6 / (fan_in + fan_out)): Glorot & Bengio 2010, eq. 16."""
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    return drawn(gen, lambda g: g.uniform(-bound, bound, size=shape), shape, dtype)


def xavier_normal(gen: np.random.Generator, fan_in: int, fan_out: int, shape, dtype):
    """N(0, 2 / (fan_in + fan_out)): the normal form of Glorot & Bengio 2010."""
    return normal(gen, math.sqrt(2.0 / (fan_in + fan_out)), shape, dtype)


def kaiming_uniform(gen: np.random.Generator, fan_in: int, shape, dtype):
    """U(−a, a), a = √(6 / fan_in): He et al. 2015, eq. 10, for ReLU layers."""
    bound = math.sqrt(6.0 / fan_in)
    return drawn(gen, lambda g: g.uniform(-bound, bound, size=shape), shape, dtype)


def normal(gen: np.random.Generator, std: float, shape, dtype):
    """N(0, std²) in every entry."""
    return drawn(gen, lambda g: g.normal(0.0, std, size=shape), shape, dtype)


def orthogonal_blocks(gen: np.random.Generator, n: int, blocks: int, dtype):
    """(n, blocks·n): ``blocks`` orthogonal n×n matrices side by side, each the Q of a
    Gaussian matrix's QR (Saxe et al. 2014): stable recurrences, one block per gate."""
    def draw(g):
        return np.concatenate([np.linalg.qr(g.standard_normal((n, n)))[0]
                               for _ in range(blocks)], axis=1)
    return drawn(gen, draw, (n, blocks * n), dtype)


def constant(value: float, shape, dtype):
    """Every entry ``value`` (a bias's zeros, a norm's ones)."""
    return drawn(None, lambda _: np.full(shape, float(value)), shape, dtype)
