"""A synthetic low-rank ratings matrix observed at random entries, whose floor is noise²/2."""

from __future__ import annotations

import math

import numpy as np

from scratchpar.backend import rng
from scratchpar.data.checks import check_int, check_rows, check_step, cut
from scratchpar.data.fresh import Fresh

_FACTOR_STREAM = 1
_BATCH_STREAM = 2


class LowRankRatings(Fresh):
    """Observed entries of ``R = U* V*ᵀ + noise``: a batch is ``user`` int64 ``(b,)``, ``item``
    int64 ``(b,)`` and ``rating`` float32 ``(b,)``.

    The true factors ``U*`` ``(n_users, rank)`` and ``V*`` ``(n_items, rank)`` have entries
    ``N(0, 1/√rank)``, so a noiseless rating ``U*[u]·V*[i]`` (a sum of ``rank`` products of
    variance ``1/rank``) has variance 1 whatever the rank. Each observed rating adds
    ``N(0, noise²)``. The ``(user, item)`` pairs are uniform over the whole matrix, with
    replacement, fresh in every batch: an endless stream of observations of one fixed matrix.
    ``batch(step, b)`` is a pure function of ``(seed, step)``.
    """

    def __init__(self, n_users: int = 200, n_items: int = 200, rank: int = 4,
                 noise: float = 0.1, seed: int = 0):
        self.n_users = check_int("n_users", n_users, 1)
        self.n_items = check_int("n_items", n_items, 1)
        self.rank = check_int("rank", rank, 1)
        self.seed = check_int("seed", seed, 0)
        if not isinstance(noise, (int, float, np.integer, np.floating)) or isinstance(noise, bool) \
                or not math.isfinite(noise) or noise < 0:
            raise ValueError(f"noise must be a finite number >= 0, got {noise!r}")
        self.noise = float(noise)
        g = rng(self.seed, _FACTOR_STREAM)
        scale = self.rank ** -0.25  # entries N(0, 1/√rank): each rating has unit variance
        self.users = g.normal(0.0, scale, size=(self.n_users, self.rank))  # (U, r) U*
        self.items = g.normal(0.0, scale, size=(self.n_items, self.rank))  # (I, r) V*

    def batch(self, step: int, batch_size: int,
              rows=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Batch ``step``: ``user`` and ``item`` int64 ``(b,)``, ``rating`` float32 ``(b,)``;
        ``rows = (start, stop)`` cuts those rows from the whole batch."""
        step, batch_size = check_step(step, batch_size)
        first, stop = check_rows(rows, batch_size)
        g = rng(self.seed, _BATCH_STREAM, step)
        user = g.integers(0, self.n_users, size=batch_size)  # (B,)
        item = g.integers(0, self.n_items, size=batch_size)  # (B,)
        noise = self.noise * g.standard_normal(batch_size)  # (B,)
        rating = (self.mean(user, item) + noise).astype(np.float32)  # (B,)
        return cut((user, item, rating), first, stop, batch_size)

    def mean(self, user: np.ndarray, item: np.ndarray) -> np.ndarray:
        """The noiseless ratings ``U*[user]·V*[item]``, float64 ``(b,)``: E[rating | u, i]."""
        return np.einsum("br,br->b", self.users[user], self.items[item])  # (B,)

    def bayes_risk(self) -> float:
        """The Bayes risk of the loss ½(r̂ − r)², the best expected loss per rating: ``noise²/2``,
        exactly. The best prediction is the mean
        ``U*[u]·V*[i]``, which leaves ½·E[ε²]. The float32 rounding of the ratings, about
        1e-7 of a rating, is all that moves a measured loss off it."""
        return 0.5 * self.noise * self.noise
