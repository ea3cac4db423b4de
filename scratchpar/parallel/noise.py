"""A data-parallel rank's part in the gradient noise scale (``optim/noise_scale.py``).

Each rank's own summed gradient ∇Lᵣ exists just before its reduction: the squared norm is taken
there, array by array or bucket by bucket, in float64 on the device. After the update, the
rank's mean gradient gᵣ = ∇Lᵣ/nᵣ (nᵣ its units) over its bᵣ rows, and the norm of the reduced
gradient before clipping, which the update measured (over all B rows), give one step's
estimates: one all-reduce of four numbers, [|gᵣ|², 1/bᵣ, 1, bᵣ] from every rank that holds
rows. Rows of one length (a language model's) make the mean over units a mean over rows.
"""

from __future__ import annotations

import math

from ..comm import collectives
from ..optim.guard import read_scalars
from ..optim.noise_scale import NoiseScale, from_sums


class LocalNoise:
    """Folds each step's estimates into ``scale`` and reports them as metrics."""

    def __init__(self, comm, xp, scale: NoiseScale):
        self.comm, self.xp, self.scale = comm, xp, scale
        self._clear()

    def _clear(self) -> None:
        self.sq, self.rows, self.units = self.xp.zeros((), "float64"), 0, 0.0

    def add(self, grad) -> None:
        """The summed gradient of some parameters, just before their reduction."""
        flat = grad.ravel()
        self.sq += self.xp.vdot(flat, flat).astype("float64")

    def count(self, rows: int, units) -> None:
        """The rows and units this rank's loss took since the last update (several batches'
        with ``no_sync``)."""
        self.rows, self.units = self.rows + rows, self.units + units

    def metrics(self, grad_norm: float) -> dict:
        """This step's ``gradient_sq`` and ``gradient_trace`` (|G|² and tr(Σ) of one row, None
        on a step that cannot tell them apart) and the running ``noise_scale``, B_simple in
        rows; ``grad_norm``: the norm of the reduced mean gradient, over every rank's rows."""
        if not math.isfinite(grad_norm):  # a skipped step: every rank read the same norm
            self._clear()
            return {"gradient_sq": None, "gradient_trace": None,
                    "noise_scale": self.scale.value()}
        xp, held = self.xp, float(self.rows > 0)
        mean_sq = self.sq / xp.maximum(xp.asarray(self.units, "float64"), 1.0) ** 2
        local = xp.stack([mean_sq * held, xp.asarray(held / max(self.rows, 1)),
                          xp.asarray(held), xp.asarray(float(self.rows))])  # (4,) float64
        sum_sq, sum_inverse, shards, rows = read_scalars(*collectives.all_reduce_(self.comm,
                                                                                 local))
        self._clear()
        sample = from_sums(sum_sq, sum_inverse, round(shards), round(rows), grad_norm**2)
        return {"gradient_sq": None if sample is None else sample.gradient_sq,
                "gradient_trace": None if sample is None else sample.trace,
                "noise_scale": self.scale.update(sample)}
