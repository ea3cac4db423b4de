"""A local step's shared verdict: each rank backpropagates its own shard's mean loss, and one small
all-reduce of [loss, units, ‖g‖] gives every rank the global mean loss and one finite verdict."""

from __future__ import annotations

import math
from typing import NamedTuple

from ..backend import get_array_module
from ..comm import collectives
from ..optim import guarded_step
from ..optim.clip import grad_norm_array
from ..optim.guard import read_scalars, refused


class Verdict(NamedTuple):
    """``loss``: the global batch's mean loss; ``norm``: this rank's own ‖gᵣ‖; ``finite``: every
    rank's loss and gradient are finite, the same on every rank."""

    loss: float
    norm: float
    finite: bool

    def step(self, optimizer, params, grad_clip: float) -> dict:
        """The rank's own optimizer step on its gradient, clipped to ``grad_clip``; skipped on
        every rank alike unless the verdict is finite (a 16-bit gradient's overflow halving
        every rank's loss scale alike)."""
        if not self.finite:
            return refused(optimizer, self.loss, self.norm)
        return guarded_step(optimizer, params, self.loss, grad_clip, self.norm)


def from_summed(comm, params, loss, units) -> Verdict:
    """``loss``: Lᵣ, this rank's loss summed over its nᵣ ``units`` (local SGD, Lin et al. 2020,
    takes data parallelism's). Backpropagates Lᵣ/nᵣ, this rank's mean; reduces [Lᵣ, nᵣ, ‖gᵣ‖]."""
    xp = get_array_module(loss.data)
    (loss * (1.0 / xp.maximum(units, 1))).backward()  # this rank's mean gradient
    return _agree(comm, params, loss.data, units)


def from_mean(comm, params, loss, units) -> Verdict:
    """``loss``: this rank's mean over its nᵣ ``units`` (synchronous EASGD, Zhang et al. 2015).
    Backpropagates it; reduces [Lᵣ·nᵣ, nᵣ, ‖gᵣ‖], the product taken in float64."""
    loss.backward()
    n = get_array_module(loss.data).asarray(units, dtype="float64")
    return _agree(comm, params, loss.data.astype("float64") * n, n)


def _agree(comm, params, weighted, units) -> Verdict:
    """After this rank's backward: [Σ Lᵣnᵣ, N, Σ ‖gᵣ‖] in one all-reduce, read with ‖gᵣ‖ in
    the step's one wait. Σ ‖gᵣ‖ is finite iff every rank's gradient is."""
    norm = grad_norm_array(params)  # ‖gᵣ‖, 0-d
    totals = get_array_module(weighted).zeros(3, "float64")  # (3,)
    totals[0], totals[1], totals[2] = weighted, units, norm
    loss_sum, total, norms, norm = read_scalars(*collectives.all_reduce_(comm, totals), norm)
    mean = loss_sum / max(total, 1.0)
    return Verdict(mean, norm, math.isfinite(norms) and math.isfinite(mean))
