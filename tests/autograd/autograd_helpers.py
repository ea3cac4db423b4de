"""Shared strategies and helpers of the autograd tests: shapes, broadcast pairs, float64 leaves."""

from __future__ import annotations

import numpy as np
from device_helpers import host, on_device
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from scratchpar.autograd import Tensor

PROPERTY = settings(max_examples=30, deadline=None)  # float64 grad checks on small arrays
FEW = settings(max_examples=15, deadline=None)  # the slower checks

seeds = st.integers(0, 2**32 - 1)


def shapes(min_dims: int = 0, max_dims: int = 3, max_side: int = 3):
    """Array shapes with every side ≥ 1 (0-d included when ``min_dims`` is 0)."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=max_side)


@st.composite
def broadcast_pair(draw, min_dims: int = 0, max_dims: int = 3, max_side: int = 3):
    """Two shapes that broadcast together: some sides set to 1 in either, leading dims dropped."""
    shape = draw(shapes(min_dims, max_dims, max_side))
    a, b = list(shape), list(shape)
    for i in range(len(shape)):
        which = draw(st.sampled_from(("both", "a", "b")))
        if which == "a":
            a[i] = 1
        elif which == "b":
            b[i] = 1
    drop = draw(st.integers(0, len(shape)))
    if draw(st.booleans()):
        a = a[drop:]
    else:
        b = b[drop:]
    return tuple(a), tuple(b)


def leaf(array) -> Tensor:
    """A fresh float64 leaf on the test's device that requires grad (its own contiguous copy of
    ``array``, which may be on the host or the device)."""
    return Tensor(on_device(np.array(host(array), dtype=np.float64)), requires_grad=True)


def normal(rng: np.random.Generator, shape) -> Tensor:
    return leaf(rng.standard_normal(shape))


def away_from_zero(rng: np.random.Generator, shape, low: float = 0.2, high: float = 2.0) -> Tensor:
    """Values with |x| in [low, high] and random signs: no kink, no pole within ε of them."""
    signs = rng.choice([-1.0, 1.0], size=shape)
    return leaf(signs * rng.uniform(low, high, size=shape))


def positive(rng: np.random.Generator, shape, low: float = 0.5, high: float = 2.0) -> Tensor:
    return leaf(rng.uniform(low, high, size=shape))


def distinct(rng: np.random.Generator, shape) -> Tensor:
    """Values at least 0.1 apart, so a max has a unique winner well beyond ε."""
    size = int(np.prod(shape, dtype=np.int64))
    values = 0.1 * rng.permutation(size) + rng.uniform(0.0, 0.01, size)
    return leaf(values.reshape(shape))
