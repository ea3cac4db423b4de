"""Recursive-doubling all-reduce: log₂ p exchanges of the whole buffer, the choice for small ones.

At step k each rank swaps its partial result with the rank whose number differs in bit k, so
after log₂ p steps every rank has combined all p. A world that is not a power of two first folds
its 2·rem lowest ranks in pairs, the even one handing its data to its odd neighbour, and unfolds
at the end (Thakur, Rabenseifner & Gropp 2005, §4.1). Each rank sends N·log₂ p elements, against
the ring's 2N, but in log₂ p messages instead of 2(p−1).
"""

from __future__ import annotations

from scratchpar.comm.ops import combine


def all_reduce(comm, flat, op: str, scratch):
    """Every rank ends with ⊕ over ranks of ``flat``; ``scratch`` holds one buffer's worth."""
    p, r = comm.size, comm.rank
    pof2 = 1 << (p.bit_length() - 1)  # largest power of two ≤ p
    rem = p - pof2
    if r < 2 * rem and r % 2 == 0:  # fold: hand the data to r+1 and wait for the answer
        yield [comm.isend(flat, r + 1)]
        yield [comm.irecv(flat, r + 1)]
        return
    if r < 2 * rem:
        yield [comm.irecv(scratch, r - 1)]
        combine(op, flat, scratch)
    vr = r // 2 if r < 2 * rem else r - rem  # rank among the pof2 that take part
    mask = 1
    while mask < pof2:
        vpartner = vr ^ mask
        partner = 2 * vpartner + 1 if vpartner < rem else vpartner + rem
        yield [comm.irecv(scratch, partner), comm.isend(flat, partner)]
        combine(op, flat, scratch)  # a ⊕ b on one side, b ⊕ a on the other: the same bits
        mask <<= 1
    if r < 2 * rem:  # unfold: return the result to the rank that sat out
        yield [comm.isend(flat, r - 1)]
