"""Which expert slot each token takes: its router's top k, and each expert's capacity.

A token's k choices are the experts of its k largest router probabilities (ties to the lower
expert). Each expert takes at most ``capacity`` of the assignments, in priority order: every
token's first choice before any token's second (GShard, Lepikhin et al. 2020, §2.2, Algorithm
1), and within a rank of choice, tokens in order. An assignment over capacity is dropped: the
token's output from that expert is 0 and the block's residual carries it on (Fedus et al.
2021, §2.2). Dropless routing (no capacity) keeps every assignment.

The order is the micro-batch's, whichever ranks hold its tokens. A rank knows its tokens as
segments, runs of consecutive positions of the micro-batch (one on one device; under data
and context parallelism, each of its rows' chunks), and a :class:`Tally` of every rank's
segments tells it how many assignments to each expert lie ahead of each of its own: so a
token's place at its expert, and the drop decision, are one device's.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..backend import to_host


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


class Tally(NamedTuple):
    """What routing knows of the micro-batch beyond this rank's tokens: ``tokens`` N and
    ``routed`` (E,) its assignments per expert, ``slots`` each expert's capacity (``None``:
    dropless), ``segments`` (S + 1,) the bounds of this rank's segments among its tokens and
    ``before`` (S, k, E) the assignments ahead of each segment by rank of choice and expert,
    and the micro-batch's figures ``stats`` (dropped, load, and the two auxiliary losses)."""

    tokens: int
    routed: np.ndarray
    slots: int | None
    segments: np.ndarray
    before: np.ndarray
    stats: dict


class Share(NamedTuple):
    """One rank's part of a micro-batch's routing: its segments' ``starts`` (S,) (positions in
    the micro-batch) and ``counts`` (S, k, E) of assignments, its router probabilities summed
    over its tokens ``probs`` (E,), Σ of its tokens' squared log-sum-exp ``z``, and its
    ``tokens``. Host values."""

    starts: np.ndarray
    counts: np.ndarray
    probs: np.ndarray
    z: float
    tokens: int


def capacity(tokens: int, k: int, experts: int, factor: float) -> int | None:
    """⌈k·T·c/E⌉ slots an expert (Fedus et al. 2021, eq. 3, with k choices a token); ``None``
    for c = 0: dropless."""
    return None if factor == 0 else math.ceil(k * tokens * factor / experts)


def top_k(probs, k: int, xp=np):
    """(T, k): each token's experts by router probability, best first, ties to the lower."""
    return xp.argsort(-probs, axis=-1, kind="stable")[:, :k]


def segments_of(positions) -> np.ndarray:
    """(S + 1,) the bounds of the runs of consecutive values of ``positions`` (T,)."""
    if len(positions) == 0:
        return np.zeros(1, np.int64)  # no segment
    breaks = np.flatnonzero(np.diff(positions) != 1) + 1
    return np.concatenate([[0], breaks, [len(positions)]]).astype(np.int64)


def count(choice, experts: int, segments, xp=np) -> np.ndarray:
    """(S, k, E) on the host: each segment's assignments by rank of choice and expert."""
    hits = choice.T[:, :, None] == xp.arange(experts)  # (k, T, E)
    k = choice.shape[1]
    total = xp.concatenate([xp.zeros((k, 1, experts), np.int64),
                            xp.cumsum(hits, axis=1)], axis=1)  # (k, T + 1, E)
    bounds = xp.asarray(segments)
    counts = total[:, bounds[1:]] - total[:, bounds[:-1]]  # (k, S, E)
    return to_host(counts).transpose(1, 0, 2)


def tally(shares: list[Share], mine: int, segments, k: int, spec, per_rank: bool = False
          ) -> Tally:
    """Rank ``mine``'s :class:`Tally` of the micro-batch whose every rank's :class:`Share` is
    ``shares`` (``segments``: its own bounds). The slots are counted over the micro-batch's
    tokens, or with ``per_rank`` over each rank's alone, each rank's order its own (Megatron-LM's
    and DeepSpeed's capacity: not one device's drops)."""
    e = spec.count
    every = np.concatenate([s.counts for s in shares])  # (S_all, k, E)
    routed = every.sum(axis=0)  # (k, E)
    tokens = sum(s.tokens for s in shares)
    by_rank = [s.counts.sum(axis=(0, 1)) for s in shares]  # (E,) per rank
    if per_rank:
        slots = [capacity(s.tokens, k, e, spec.capacity_factor) for s in shares]
        own = shares[mine].counts
        before = _ahead(own, shares[mine].starts, shares[mine].starts)
        kept = sum(int(np.minimum(r, n).sum()) if n is not None else int(r.sum())
                   for r, n in zip(by_rank, slots))
        slots = slots[mine]
    else:
        slots = capacity(tokens, k, e, spec.capacity_factor)
        starts = np.concatenate([s.starts for s in shares])
        before = _ahead(every, starts, shares[mine].starts)
        total = routed.sum(axis=0)
        kept = int(total.sum() if slots is None else np.minimum(total, slots).sum())
    per_expert = routed.sum(axis=0)  # (E,)
    fraction = per_expert / max(k * tokens, 1)
    probs = sum(s.probs for s in shares) / max(tokens, 1)  # (E,) Pᵢ
    stats = {"dropped": int(per_expert.sum()) - kept,
             "load": float(per_expert.max() / max(per_expert.mean(), 1e-12)),
             "balance_loss": float(spec.balance * e * (fraction * probs).sum()),
             "z_loss": float(spec.z_loss * sum(s.z for s in shares) / max(tokens, 1))}
    return Tally(tokens, per_expert, slots, np.asarray(segments), before, stats)


def _ahead(counts, starts, mine) -> np.ndarray:
    """(S, k, E): for each of the segments starting at ``mine``, the assignments ahead of it
    in priority order: every earlier rank of choice's, and its own rank's at the segments of
    ``counts`` (S_all, k, E), starting at ``starts``, that come before it."""
    routed = counts.sum(axis=0)  # (k, E)
    earlier_choices = np.cumsum(routed, axis=0) - routed  # (k, E)
    order = np.argsort(starts, kind="stable")
    ahead = np.cumsum(counts[order], axis=0) - counts[order]  # (S_all, k, E)
    return ahead[np.searchsorted(starts[order], mine)] + earlier_choices


def places(choice, experts: int, segments, before, xp=np):
    """(T, k): each assignment's place at its expert in the micro-batch's priority order: the
    assignments ahead of its segment (``before``, (S, k, E)) and those of its segment before
    it."""
    if choice.shape[0] == 0:
        return xp.zeros(choice.shape, np.int64)
    hits = choice.T[:, :, None] == xp.arange(experts)  # (k, T, E)
    ahead = xp.cumsum(hits, axis=1) - hits  # (k, T, E) this rank's earlier assignments
    bounds = np.asarray(segments)
    seg = xp.asarray(np.repeat(np.arange(len(bounds) - 1), np.diff(bounds)))  # (T,)
    start = ahead[:, xp.asarray(bounds[:-1])]  # (k, S, E)
    place = ahead - start[:, seg] + xp.asarray(before).transpose(1, 0, 2)[:, seg]  # (k, T, E)
    return xp.take_along_axis(place, choice.T[:, :, None], axis=2)[..., 0].T


def assign(choice, place, slots: int | None, experts: int, xp=np) -> Routes:
    """The routes of T tokens whose k choices ``choice`` (T, k) take the places ``place`` (T, k)
    at their experts, each expert keeping ``slots`` (all: ``None``)."""
    t, k = choice.shape
    wanted = choice.T.reshape(-1)  # (k·T,) in priority order: first choices, then seconds, …
    keep = (xp.ones(k * t, dtype=bool) if slots is None
            else (place < slots).T.reshape(-1))  # (k·T,)
    hits = wanted[:, None] == xp.arange(experts)  # (k·T, E)
    kept_hits = hits & keep[:, None]
    rank = (xp.cumsum(kept_hits, axis=0) - 1)[xp.arange(k * t), wanted]  # among kept here
    taken = kept_hits.sum(axis=0)  # (E,)
    start = xp.cumsum(taken) - taken  # each expert's first row end to end
    kept = int(taken.sum())
    slot = xp.where(keep, start[wanted] + rank, kept).reshape(k, t).T  # (T, k)
    token = xp.tile(xp.arange(t), k)  # (k·T,) the token of each assignment
    rows = [token[keep & (wanted == i)] for i in range(experts)]
    return Routes(choice, slot, rows, hits.sum(axis=0), kept)


def route(probs, k: int, slots: int | None, xp=np) -> Routes:
    """The routes of T tokens on one device by their router probabilities ``probs`` (T, E),
    host or device values, each expert taking at most ``slots`` assignments (all: ``None``)."""
    t, e = probs.shape
    choice = top_k(probs, k, xp)
    segments = np.array([0, t])
    before = _ahead(count(choice, e, segments, xp), np.zeros(1), np.zeros(1))
    return assign(choice, places(choice, e, segments, before, xp), slots, e, xp)
