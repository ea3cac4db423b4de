"""Matrix factorization: a rating is the dot product of a user's and an item's factor rows."""

from __future__ import annotations

import numpy as np

from ..autograd import functional as F
from ..backend import get_array_module
from . import init
from .module import Module, Parameter

INIT_SCALE = 0.5  # factors at half the scale of LowRankRatings' true ones


class MatrixFactorization(Module):
    """(user (B,) int, item (B,) int) → predicted ratings (B,): r̂ = ⟨P[user], Q[item]⟩.

    The factor model of Koren, Bell & Volinsky 2009 (eq. 1), without its biases: ``users`` P
    (n_users, rank) and ``items`` Q (n_items, rank), each row read by an embedding lookup
    (``F.gather``), so a batch reads and updates only the rows of its users and items. The
    entries start N(0, (INIT_SCALE·rank^−¼)²), so the first predictions have variance 1/16
    (unit-variance ratings: 1): small, but off the saddle at P = Q = 0, where every gradient
    vanishes. Its loss is ½ the squared error (``nn.half_squared_error``).
    """

    def __init__(self, n_users: int, n_items: int, rank: int, gen: np.random.Generator,
                 dtype=np.float32):
        std = INIT_SCALE * rank ** -0.25
        self.users = Parameter(init.normal(gen, std, (n_users, rank), dtype))
        self.items = Parameter(init.normal(gen, std, (n_items, rank), dtype))

    def forward(self, user, item):
        both = F.gather(self.users, user) * F.gather(self.items, item)  # (B, rank)
        return both.sum(axis=1)  # (B,)

    def touched(self, batch) -> dict:
        """The parameter rows that ``batch`` (user, item, rating) reads and whose gradient it
        writes: ``{"users": its distinct users, "items": its distinct items}``, int64 on the
        batch's device. Every other row's gradient is exactly 0."""
        xp = get_array_module(batch[0])
        return {"users": xp.unique(batch[0]), "items": xp.unique(batch[1])}
