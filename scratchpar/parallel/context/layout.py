"""Which positions of a sequence each rank of a cp group holds, and the causal mask between
any two sets of positions.

Contiguous, the spec: rank r holds positions [r·T/cp, (r + 1)·T/cp). Under a causal mask its
queries see only the keys at or before them, so rank cp − 1 does 2·cp − 1 times rank 0's work
(Brandon et al. 2023, "Striped Attention", §3, measure this imbalance of the causal ring).
Zig-zag, the cut Megatron-LM's context parallelism makes: the sequence is cut into 2·cp chunks
and rank r holds chunks r and 2·cp − 1 − r, one early and one late, so every rank does the same
work.
"""

from __future__ import annotations

import numpy as np

LAYOUTS = ("zigzag", "contiguous")


class ContextError(ValueError):
    """A sequence that the cp group cannot split as asked."""


class Context:
    """A cp group and its layout: the positions each of its ranks holds of a T-token sequence
    (cached per T), which every context-parallel layer of a model shares."""

    def __init__(self, comm, layout: str = "zigzag"):
        if layout not in LAYOUTS:
            raise ContextError(f"layout {layout!r} is not one of {', '.join(LAYOUTS)}")
        self.comm, self.layout, self._held = comm, layout, {}

    def held(self, t: int) -> list[np.ndarray]:
        """``held(t)[i]``: the (T/cp,) positions rank i holds of a T-token sequence."""
        if t not in self._held:
            self._held[t] = [positions(t, self.comm.size, r, self.layout)
                             for r in range(self.comm.size)]
        return self._held[t]

    def mine(self, t: int) -> np.ndarray:
        """The (T/cp,) positions this rank holds of a T-token sequence."""
        return self.held(t)[self.comm.rank]


def positions(t: int, cp: int, rank: int, layout: str = "zigzag") -> np.ndarray:
    """The (T/cp,) positions, ascending, that rank ``rank`` of ``cp`` holds of a T-token
    sequence."""
    if layout not in LAYOUTS:
        raise ContextError(f"layout {layout!r} is not one of {', '.join(LAYOUTS)}")
    pieces = 2 * cp if layout == "zigzag" else cp
    if t % pieces:
        raise ContextError(f"a {layout} cp layout over {cp} ranks cuts the sequence into "
                           f"{pieces} equal chunks; {t} tokens do not divide by {pieces}")
    n = t // pieces
    if layout == "contiguous":
        return np.arange(rank * n, (rank + 1) * n)
    early, late = rank, 2 * cp - 1 - rank
    return np.concatenate([np.arange(early * n, (early + 1) * n),
                           np.arange(late * n, (late + 1) * n)])


def future(query, key, xp=np):
    """(Tq, Tk) bool, True where key position ``key[j]`` is after query position ``query[i]``:
    the causal mask, hidden entries True (as ``AttentionCore.causal_mask`` has it)."""
    return xp.asarray(key)[None, :] > xp.asarray(query)[:, None]
