"""Aggregate, then apply: a clock's pushes held until every worker present has pushed it, then
one update, as the synchronous server makes it (sync as SSP with τ = 0, SSP, the warm start's
first clocks; Ho et al. 2013, §3; Dean et al. 2012, §4.1)."""

from __future__ import annotations

import math

import numpy as np

from ...comm import collectives
from .protocol import Header, weighted_mean


class HeldClocks:
    """The pushes a server holds, by clock. ``group`` is the servers' communicator: the
    ``servers`` agree on each update's norm, for clipping."""

    def __init__(self, group, servers: int):
        self.group, self.servers = group, servers
        self.held: dict[int, dict] = {}  # clock → {worker: (grad, header, read)}

    def hold(self, w: int, grad, h: Header, read: int) -> None:
        """Worker w's push of clock ``h.clock``, computed on version ``read``."""
        self.held.setdefault(h.clock, {})[w] = (grad, h, read)

    def complete(self, slowest: float) -> list[int]:
        """The clocks held that every worker present has pushed, in clock order."""
        return [c for c in sorted(self.held) if c < slowest]

    def update(self, c: int) -> tuple:
        """Clock c's pushes as one update, in worker order (``weighted_mean``): its gradient
        (K_s,), loss, rate, norm over every server's range, and the versions it was computed
        on."""
        held = self.held.pop(c)
        pushes = [held[w] for w in sorted(held)]
        grad, loss = weighted_mean([g for g, _, _ in pushes], [h.mean for _, h, _ in pushes],
                                   [h.units for _, h, _ in pushes])  # (K_s,)
        squares = np.array([(grad.astype("float64") ** 2).sum()])
        if self.servers > 1:  # every server completes the clocks in the same order
            collectives.all_reduce_(self.group, squares)
        return grad, loss, pushes[0][1].lr, math.sqrt(squares[0]), [r for _, _, r in pushes]
