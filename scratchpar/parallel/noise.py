"""The gradient noise scale as a probe (``optim/noise_scale.py``): each shard's gradient beside
the reduced one.

A shard's own summed gradient ∇Lᵣ exists just before its reduction: the squared norm is taken
there, array by array or bucket by bucket, in float64 on the device. After the update, the
shard's mean gradient gᵣ = ∇Lᵣ/nᵣ (nᵣ its units) over its bᵣ rows, and the norm of the reduced
gradient before clipping, which the update measured (over all B rows), give one step's
estimates: one all-reduce of four numbers, [|gᵣ|², 1/bᵣ, 1, bᵣ] summed over the shards that hold
rows. A data-parallel rank is one shard; one device cuts its step in two
(McCandlish et al. 2018, Appendix A.1). Rows of one length (a language model's) make the mean
over units a mean over rows.
"""

from __future__ import annotations

import math

from ..backend import get_array_module
from ..comm import collectives
from ..optim.guard import read_scalars
from ..optim.noise_scale import NoiseScale, from_sums
from .probe import Probe


class NoiseProbe(Probe):
    """Folds each step's estimates into ``scale`` and reports ``gradient_sq``,
    ``gradient_trace`` (|G|² and tr(Σ) of one row, None on a step that cannot tell them
    apart) and the running ``noise_scale``, B_simple in rows."""

    needs = frozenset({"shard", "gradient", "report"})
    shards = 2

    def __init__(self, scale: NoiseScale | None = None):
        self.scale = NoiseScale() if scale is None else scale
        self.comm = self.xp = None

    def bind(self, strategy) -> None:
        self.comm = strategy.comm if strategy.comm is not None and strategy.comm.size > 1 else None
        self.xp = get_array_module(*(p.data for p in strategy.params))
        self._clear()

    def _clear(self) -> None:
        self.parts = self.xp.zeros(4, "float64")  # Σ over closed shards of [|gᵣ|², 1/bᵣ, 1, bᵣ]
        self._open()

    def _open(self) -> None:
        self.sq, self.rows, self.units, self.summed = self.xp.zeros((), "float64"), 0, 0.0, False

    def shard(self, rows: int, units) -> None:
        """Rows and units this shard's loss took (several batches' with ``no_sync``)."""
        if self.summed:
            self._close()
        self.rows, self.units = self.rows + rows, self.units + units

    def gradient(self, grad) -> None:
        flat = grad.ravel()
        self.sq += self.xp.vdot(flat, flat).astype("float64")
        self.summed = True

    def _close(self) -> None:
        """The open shard's [|gᵣ|², 1/bᵣ, 1, bᵣ] into the sums (zeros for a shard of no rows)."""
        xp, held = self.xp, float(self.rows > 0)
        mean_sq = self.sq / xp.maximum(xp.asarray(self.units, "float64"), 1.0) ** 2
        self.parts += xp.stack([mean_sq * held, xp.asarray(held / max(self.rows, 1)),
                                xp.asarray(held), xp.asarray(float(self.rows))])
        self._open()

    def report(self, metrics: dict) -> dict:
        """``metrics["grad_norm"]``: the norm of the reduced mean gradient over every row. A
        skipped step (every rank skips alike) adds no estimate."""
        grad_norm = metrics["grad_norm"]
        if metrics["skipped"] or not math.isfinite(grad_norm):
            self._clear()
            return {"gradient_sq": None, "gradient_trace": None,
                    "noise_scale": self.scale.value()}
        self._close()
        sums = self.parts if self.comm is None else collectives.all_reduce_(self.comm, self.parts)
        sum_sq, sum_inverse, shards, rows = read_scalars(*sums)
        self._clear()
        sample = from_sums(sum_sq, sum_inverse, round(shards), round(rows), grad_norm**2)
        return {"gradient_sq": None if sample is None else sample.gradient_sq,
                "gradient_trace": None if sample is None else sample.trace,
                "noise_scale": self.scale.update(sample)}
