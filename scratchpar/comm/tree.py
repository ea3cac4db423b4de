"""Binomial-tree broadcast and reduce: ⌈log₂ p⌉ rounds, the whole buffer in every message.

Number ranks relative to the root, v = (rank − root) mod p. In a binomial tree the parent of v is
v with its lowest set bit cleared, and its children are v + 2ᵏ for every 2ᵏ below that bit. A
broadcast flows from the root down those edges. A reduce flows up them, each node combining its
children's partial results before passing its own on.
"""

from __future__ import annotations

from scratchpar.comm.ops import combine


def broadcast(comm, flat, root: int):
    """Every rank ends with the root's ``flat``."""
    p, v = comm.size, (comm.rank - root) % comm.size
    mask = 1
    while mask < p:
        if v & mask:  # the lowest set bit: receive from the parent
            yield [comm.irecv(flat, (v - mask + root) % p)]
            break
        mask <<= 1
    sends = []
    mask >>= 1
    while mask > 0:  # forward to the children below that bit, farthest first
        if v + mask < p:
            sends.append(comm.isend(flat, (v + mask + root) % p))
        mask >>= 1
    yield sends


def reduce(comm, flat, op: str, root: int, scratch):
    """The root's ``flat`` ends as ⊕ over ranks; elsewhere ``flat`` is used as scratch."""
    p, v = comm.size, (comm.rank - root) % comm.size
    mask = 1
    while mask < p:
        if v & mask:  # pass the partial result up to the parent, and we are done
            yield [comm.isend(flat, (v - mask + root) % p)]
            return
        if v + mask < p:  # absorb the child's subtree
            yield [comm.irecv(scratch, (v + mask + root) % p)]
            combine(op, flat, scratch)
        mask <<= 1


def all_reduce(comm, flat, op: str, scratch):
    """Reduce to rank 0, then broadcast from it: 2⌈log₂ p⌉ rounds."""
    yield from reduce(comm, flat, op, 0, scratch)
    yield from broadcast(comm, flat, 0)
