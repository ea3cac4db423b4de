"""Recursive-doubling all-reduce: log₂ p exchanges of the whole buffer, the choice for small ones.

At step k each rank swaps its partial result with the rank whose number differs in bit k, so
after log₂ p steps every rank has combined all p. A world that is not a power of two first folds
its 2·rem lowest ranks in pairs, the even one handing its data to its odd neighbour, and unfolds
at the end (Thakur, Rabenseifner & Gropp 2005, §4.1). Each rank sends N·log₂ p elements, against
the ring's 2N, but in log₂ p messages instead of 2(p−1).
"""

from __future__ import annotations

from scratchpar.comm.ops import combine, ufunc


def all_reduce(comm, flat, op: str, scratch):
    """Every rank ends with ⊕ over ranks of ``flat``; ``scratch`` holds one buffer's worth."""
    vr = yield from fold(comm, flat, op, scratch)
    if vr is None:
        return
    pof2, mask = power_of_two(comm.size), 1
    while mask < pof2:
        partner = real_rank(vr ^ mask, comm.size)
        yield [comm.irecv(scratch, partner), comm.isend(flat, partner)]
        combine(op, flat, scratch)  # a ⊕ b on one side, b ⊕ a on the other: the same bits
        mask <<= 1
    yield from unfold(comm, flat)


def all_reduce_now(comm, flat, op: str, scratch) -> None:
    """:func:`all_reduce` on a host array at a power-of-two p, blocking, inside the operation the
    caller has entered: each step one :meth:`~scratchpar.comm.point_to_point.PointToPoint.exchange`
    with the rank whose number differs in that bit. The same messages and sums, without a
    Handle driving a generator: a 4 KiB all-reduce is mostly that driving."""
    reduce, mask = ufunc(op), 1
    while mask < comm.size:
        comm.exchange(flat, scratch, comm.rank ^ mask)
        reduce(flat, scratch, out=flat)  # a ⊕ b on one side, b ⊕ a on the other: same bits
        mask <<= 1


def power_of_two(p: int) -> int:
    """The largest power of two ≤ p: the ranks that take part after the fold."""
    return 1 << (p.bit_length() - 1)


def fold(comm, flat, op: str, scratch):
    """Of the 2·rem lowest ranks (rem = p − the power of two), each even one hands its data to
    its odd neighbour, which adds it, and waits for the result; the rest take part. Yields the
    messages; returns this rank's number among those that take part, or None if it sat out (its
    ``flat`` then holds the result)."""
    p, r = comm.size, comm.rank
    rem = p - power_of_two(p)
    if r < 2 * rem and r % 2 == 0:
        yield [comm.isend(flat, r + 1)]
        yield [comm.irecv(flat, r + 1)]
        return None
    if r < 2 * rem:
        yield [comm.irecv(scratch, r - 1)]
        combine(op, flat, scratch)
    return r // 2 if r < 2 * rem else r - rem


def real_rank(virtual: int, p: int) -> int:
    """The rank that takes part as ``virtual`` after :func:`fold`."""
    rem = p - power_of_two(p)
    return 2 * virtual + 1 if virtual < rem else virtual + rem


def unfold(comm, flat):
    """Return the result to the rank that sat out (:func:`fold`)."""
    r = comm.rank
    if r < 2 * (comm.size - power_of_two(comm.size)):
        yield [comm.isend(flat, r - 1)]
