"""A worker's own gradient in elastic averaging: its summed loss, backpropagated, over its units."""

from __future__ import annotations

import math

from ...optim.clip import grad_norm_array
from ...optim.guard import read_scalars


def own_verdict(strategy, batch) -> tuple[float, float, bool, float]:
    """A worker's own verdict on its step: its mean gradient ∇fⁱ(xⁱ) (Zhang et al. 2015,
    eq. 3; :meth:`~scratchpar.parallel.strategy.Strategy.backward_mean`), read on the host in
    one copy: ``(mean loss, ‖g‖, both finite, units)``."""
    loss, n, scale = strategy.backward_mean(batch)
    mean, norm, n = read_scalars(loss * scale, grad_norm_array(strategy.params), n)
    return mean, norm, math.isfinite(mean) and math.isfinite(norm), n
