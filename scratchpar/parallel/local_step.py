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
    rank's loss and gradient are finite, the same on every rank; ``units``: N, every rank's."""

    loss: float
    norm: float
    finite: bool
    units: float

    def step(self, optimizer, params, grad_clip: float) -> dict:
        """The rank's own optimizer step on its gradient, clipped to ``grad_clip``; skipped on
        every rank alike unless the verdict is finite (a 16-bit gradient's overflow halving
        every rank's loss scale alike)."""
        if not self.finite:
            return refused(optimizer, self.loss, self.norm)
        return guarded_step(optimizer, params, self.loss, grad_clip, self.norm)


def agree(comm, params, loss, units) -> Verdict:
    """After this rank's backward of its mean gradient (Lᵣ, its loss summed over its nᵣ
    ``units``, divided by them: :meth:`~scratchpar.parallel.strategy.Strategy.backward_mean`):
    [Σ Lᵣ, N, Σ ‖gᵣ‖] in one all-reduce, read with ‖gᵣ‖ in the step's one wait. Σ ‖gᵣ‖ is
    finite iff every rank's gradient is."""
    norm = grad_norm_array(params)  # ‖gᵣ‖, 0-d
    totals = get_array_module(loss).zeros(3, "float64")  # (3,)
    totals[0], totals[1], totals[2] = loss, units, norm
    loss_sum, total, norms, norm = read_scalars(*collectives.all_reduce_(comm, totals), norm)
    mean = loss_sum / max(total, 1.0)
    return Verdict(mean, norm, math.isfinite(norms) and math.isfinite(mean), total)
