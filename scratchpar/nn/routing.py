"""Which expert slot each token takes: its router's top k, and each expert's capacity.

A token's k choices are the experts of its k largest router probabilities (ties to the lower
expert). Each expert takes at most ``capacity`` of the assignments, in priority order: every
token's first choice before any token's second (GShard, Lepikhin et al. 2020, §2.2, Algorithm
1), and within a rank of choice, tokens in order. An assignment over capacity is dropped: the
token's output from that expert is 0 and the block's residual carries it on (Fedus et al.
2021, §2.2). Dropless routing (no capacity) keeps every assignment.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class Routes(NamedTuple):
    """``choice`` (T, k): each token's experts, best first. ``slot`` (T, k): where its output
    from each lies among the experts' outputs end to end (expert 0's rows first), ``kept`` rows
    in all, ``kept`` itself where the assignment was dropped (a zero row). ``rows``: per expert,
    the tokens it computes, in slot order. ``routed`` (E,): assignments before capacity."""

    choice: np.ndarray
    slot: np.ndarray
    rows: list
    routed: np.ndarray
    kept: int

    @property
    def dropped(self) -> int:
        """Assignments over capacity."""
        return int(self.routed.sum()) - self.kept


def capacity(tokens: int, k: int, experts: int, factor: float) -> int | None:
    """⌈k·T·c/E⌉ slots an expert (Fedus et al. 2021, eq. 3, with k choices a token); ``None``
    for c = 0: dropless."""
    return None if factor == 0 else math.ceil(k * tokens * factor / experts)


def route(probs, k: int, slots: int | None, xp=np) -> Routes:
    """The routes of T tokens by their router probabilities ``probs`` (T, E), host or device
    values, each expert taking at most ``slots`` assignments (all: ``None``)."""
    t, e = probs.shape
    choice = xp.argsort(-probs, axis=-1, kind="stable")[:, :k]  # (T, k)
    wanted = choice.T.reshape(-1)  # (k·T,) in priority order: first choices, then seconds, …
    hits = wanted[:, None] == xp.arange(e)  # (k·T, E)
    place = (xp.cumsum(hits, axis=0) - 1)[xp.arange(k * t), wanted]  # its rank at its expert
    routed = hits.sum(axis=0)  # (E,)
    taken = routed if slots is None else xp.minimum(routed, slots)
    start = xp.cumsum(taken) - taken  # each expert's first row end to end
    kept = int(taken.sum())
    keep = xp.ones_like(place, dtype=bool) if slots is None else place < slots
    slot = xp.where(keep, start[wanted] + place, kept).reshape(k, t).T  # (T, k)
    token = xp.tile(xp.arange(t), k)  # (k·T,) the token of each assignment
    rows = [token[keep & (wanted == i)] for i in range(e)]
    return Routes(choice, slot, rows, routed, kept)
