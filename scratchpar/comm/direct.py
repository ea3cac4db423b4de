"""Gather and scatter by direct messages between the root and every other rank."""

from __future__ import annotations


def gather(comm, mine, out, spans, root: int):
    """The root's ``out[spans[i]]`` receives rank i's ``mine`` (``out`` is None elsewhere)."""
    if comm.rank != root:
        yield [comm.isend(mine, root)]
        return
    a, b = spans[root]
    out[a:b] = mine
    yield [comm.irecv(out[a:b], i) for i, (a, b) in enumerate(spans) if i != root]


def scatter(comm, full, mine, spans, root: int):
    """Rank i's ``mine`` receives the root's ``full[spans[i]]`` (``full`` is None elsewhere)."""
    if comm.rank != root:
        yield [comm.irecv(mine, root)]
        return
    a, b = spans[root]
    mine[...] = full[a:b]
    yield [comm.isend(full[a:b], i) for i, (a, b) in enumerate(spans) if i != root]
