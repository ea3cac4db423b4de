"""Rabenseifner's all-reduce: a reduce-scatter by recursive halving, then an all-gather by
recursive doubling (Thakur, Rabenseifner & Gropp 2005, §4.4).

At step k of the reduce-scatter each rank swaps half of the blocks it is still reducing with the
rank whose number differs in bit log₂p − 1 − k, keeps the other half and adds the partner's copy
of it: after log₂ p steps rank r holds block r reduced over every rank. The all-gather retraces
the steps, each rank swapping everything it holds. Each rank sends 2(p − 1)/p·N elements, as the
ring does, in 2·log₂ p messages instead of 2(p − 1). A world that is not a power of two folds its
extra ranks in first, as recursive doubling does (``doubling.fold``), which costs two more whole
buffers.
"""

from __future__ import annotations

from scratchpar.comm.chunks import bounds
from scratchpar.comm.doubling import fold, power_of_two, real_rank, unfold
from scratchpar.comm.ops import combine


def all_reduce(comm, flat, op: str, scratch):
    """Every rank ends with ⊕ over ranks of ``flat``; ``scratch`` holds one buffer's worth."""
    vr = yield from fold(comm, flat, op, scratch)
    if vr is None:
        return
    pof2 = power_of_two(comm.size)
    starts = [a for a, _ in bounds(flat.size, pof2)] + [flat.size]  # block b: starts[b:b+2]
    lo, hi, mask = 0, pof2, pof2 >> 1  # the blocks this rank is still reducing: [lo, hi)
    while mask:  # reduce-scatter: keep the half of [lo, hi) that holds block vr
        partner, mid = real_rank(vr ^ mask, comm.size), (lo + hi) // 2
        (keep, give) = ((mid, hi), (lo, mid)) if vr & mask else ((lo, mid), (mid, hi))
        mine, theirs = flat[starts[keep[0]]:starts[keep[1]]], flat[starts[give[0]]:starts[give[1]]]
        incoming = scratch[:mine.size]
        yield [comm.irecv(incoming, partner), comm.isend(theirs, partner)]
        combine(op, mine, incoming)
        (lo, hi), mask = keep, mask >> 1
    mask = 1
    while mask < pof2:  # all-gather: swap everything held with the partner, which holds the rest
        partner, size = real_rank(vr ^ mask, comm.size), hi - lo
        (lo2, hi2) = (lo - size, lo) if vr & mask else (hi, hi + size)
        yield [comm.irecv(flat[starts[lo2]:starts[hi2]], partner),
               comm.isend(flat[starts[lo]:starts[hi]], partner)]
        lo, hi, mask = min(lo, lo2), max(hi, hi2), mask << 1
    yield from unfold(comm, flat)
