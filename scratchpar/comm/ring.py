"""Ring reduce-scatter, all-gather and all-reduce, in place on one flat buffer.

p ranks sit on a ring and each talks only to its neighbours: every step, rank r sends one chunk
to r+1 and receives one from r−1. Reduce-scatter takes p−1 steps and leaves rank r with the
reduction of chunk r; all-gather takes p−1 more and circulates the finished chunks. Each rank sends
2(p−1)/p·N elements in all, nearly independent of p (Patarasuk & Yuan 2009; docs/collectives.md).
"""

from __future__ import annotations

from scratchpar.comm.chunks import bounds
from scratchpar.comm.ops import combine


def reduce_scatter(comm, flat, op: str, spans, scratch):
    """Afterwards ``flat[spans[rank]]`` holds ⊕ over ranks of that chunk; ``scratch`` ≥ a chunk."""
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    for s in range(p - 1):
        a0, a1 = spans[(r - s - 1) % p]  # the partial sum we pass on
        b0, b1 = spans[(r - s - 2) % p]  # the partial sum we extend with our own data
        incoming = scratch[: b1 - b0]
        yield [comm.irecv(incoming, left), comm.isend(flat[a0:a1], right)]
        combine(op, flat[b0:b1], incoming)
    # after step s = p−2 the chunk just extended is (r − p) mod p = r: reduced over all p ranks


def all_gather(comm, flat, spans):
    """Starting with ``flat[spans[rank]]`` filled on each rank, fill every chunk everywhere."""
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    for s in range(p - 1):
        a0, a1 = spans[(r - s) % p]  # a finished chunk we hold, passed on
        b0, b1 = spans[(r - s - 1) % p]  # the next finished chunk, received in place
        yield [comm.irecv(flat[b0:b1], left), comm.isend(flat[a0:a1], right)]


def all_reduce(comm, flat, op: str, scratch):
    """Reduce-scatter then all-gather: every rank ends with ⊕ over ranks of ``flat``."""
    spans = bounds(flat.size, comm.size)
    yield from reduce_scatter(comm, flat, op, spans, scratch)
    yield from all_gather(comm, flat, spans)
