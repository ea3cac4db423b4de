"""The gradient noise scale: how large a batch is before a larger one stops paying.

McCandlish et al. 2018 ("An Empirical Model of Large-Batch Training", §2.2) model a step on a
batch of B rows drawn independently: its mean gradient g_B estimates the true gradient G with
covariance Σ/B (Σ: one row's gradient covariance), so that

    E |g_B|² = |G|² + tr(Σ)/B,                                       (Appendix A.1)

and the simple noise scale B_simple = tr(Σ)/|G|² is the batch at which the noise and the
signal in a step weigh alike: below it a larger batch trains almost proportionally faster.
Two batch sizes of the same step give both unknowns (Appendix A.1); data parallelism holds
many for free, every rank's gradient over its own rows (b_r) and the all-reduced one over all
B = Σ b_r rows. One step's estimates are noisy, and their ratio biased, so B_simple is the
ratio of their exponential moving averages (Appendix A.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    """One step's unbiased estimates of |G|² and tr(Σ)."""

    gradient_sq: float
    trace: float


def estimate(small_sq: Sequence[float], small_rows: Sequence[int], big_sq: float) -> Sample | None:
    """Unbiased |G|² and tr(Σ) from the squared norms ``small_sq`` of the mean gradients over
    disjoint shards of ``small_rows`` rows each (a shard of 0 rows is left out) and ``big_sq``,
    that of the mean gradient over all of their rows; None where fewer than two shards hold
    rows (then a shard is the whole batch, and nothing tells noise from signal).

    With h the shards' mean of 1/b_r, x̄ their mean |g_r|² and y = |g_B|², E x̄ = |G|² + h·tr(Σ)
    and E y = |G|² + tr(Σ)/B, so (Appendix A.1, for shards of any sizes)

        tr(Σ) ≈ (x̄ − y) / (h − 1/B),      |G|² ≈ (h·y − x̄/B) / (h − 1/B).
    """
    held = [(sq, rows) for sq, rows in zip(small_sq, small_rows) if rows > 0]
    return from_sums(sum(sq for sq, _ in held), sum(1 / rows for _, rows in held), len(held),
                     sum(rows for _, rows in held), big_sq)


def from_sums(sum_sq: float, sum_inverse: float, shards: int, rows: int,
              big_sq: float) -> Sample | None:
    """:func:`estimate` from what one all-reduce gives: over the ``shards`` shards that hold
    rows, the sum of their |g_r|² and of their 1/b_r, and their ``rows`` in all."""
    if shards < 2:
        return None
    h, mean_sq = sum_inverse / shards, sum_sq / shards
    gap = h - 1 / rows
    return Sample((h * big_sq - mean_sq / rows) / gap, (mean_sq - big_sq) / gap)


class NoiseScale:
    """B_simple = tr(Σ)/|G|² in rows of the batch, from exponential moving averages of each
    step's estimates with ``decay``, over about 1/(1 − decay) steps (the ratio of averages:
    both start at 0 and share their bias, which cancels). Late in training |G|² is small
    beside tr(Σ)/B and one step's estimate of it often negative: a short average swings."""

    def __init__(self, decay: float = 0.99):
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must lie in [0, 1), got {decay}")
        self.decay = decay
        self.gradient_sq = 0.0
        self.trace = 0.0

    def update(self, sample: Sample | None) -> float | None:
        """Fold in one step's ``sample`` (None: this step had none) and return B_simple, or
        None while the averaged |G|² is not positive."""
        if sample is not None:
            keep = self.decay
            self.gradient_sq = keep * self.gradient_sq + (1 - keep) * sample.gradient_sq
            self.trace = keep * self.trace + (1 - keep) * sample.trace
        return self.value()

    def value(self) -> float | None:
        return self.trace / self.gradient_sq if self.gradient_sq > 0 else None

    def state_dict(self) -> dict:
        return {"gradient_sq": self.gradient_sq, "trace": self.trace}

    def load_state_dict(self, state: dict) -> None:
        self.gradient_sq, self.trace = float(state["gradient_sq"]), float(state["trace"])
