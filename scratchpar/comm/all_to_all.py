"""All-to-all and all-to-all-v: every rank sends a block of its rows to every rank.

Rank r's rows lie end to end in p blocks, block j for rank j; what it receives lies end to end
in rank order. The hand-written algorithm is the pairwise exchange: rank r copies its own block,
then in round k = 1 … p−1 sends to r+k and receives from r−k (mod p), one pair of messages a
round. Each rank sends every block but its own: (p−1)/p of its rows when the blocks are equal
(docs/collectives.md, "All-to-all"). Context parallelism swaps a sequence shard for a head shard
with it (DeepSpeed-Ulysses); expert parallelism sends each token to its expert's rank and back.
Both functions are public in ``comm/collectives.py``.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from scratchpar.backend import get_array_module
from scratchpar.comm import debug
from scratchpar.comm.choice import resolve
from scratchpar.comm.chunks import spans_of
from scratchpar.comm.errors import CollectiveMismatch, CommError
from scratchpar.comm.progress import Handle
from scratchpar.comm.watchdog import Wait


def all_to_all(comm, x, algorithm: str = "auto"):
    """(p·n, …) → (p·n, …): rows ``j·n … (j+1)·n`` of ``x`` go to rank j, and block i of the
    result is the block that rank i sent here. Every rank passes the same shape."""
    _need_axis(x)
    if x.shape[0] % comm.size:
        raise CommError(f"all_to_all: x's {x.shape[0]} rows do not split into {comm.size} equal "
                        "blocks (all_to_all_v sends any row counts)")
    algorithm = _begin(comm, "all_to_all", algorithm, x, x.shape)
    block = [x.shape[0] // comm.size] * comm.size
    return _exchange(comm, "all_to_all", algorithm, x, block, block)


def all_to_all_v(comm, x, counts, algorithm: str = "auto", received=None):
    """``(rows, received)``: the first ``counts[0]`` rows of ``x`` go to rank 0, the next
    ``counts[1]`` to rank 1, and so on; ``rows`` (sum(received), …) joins what every rank sent
    here in rank order, ``received[i]`` rows from rank i. The counts (host integers, one per
    rank) travel first, by an all-to-all of their own, unless every rank passes ``received``:
    sending a dispatch's rows back, ``all_to_all_v(comm, rows, received, received=counts)``
    knows them. In debug mode a ``received`` that the senders' counts contradict raises."""
    _need_axis(x)
    sent = _counts("counts", counts, comm.size)
    if sum(sent) != x.shape[0]:
        raise CommError(f"all_to_all_v: counts {sent} sum to {sum(sent)} rows but x has "
                        f"{x.shape[0]}")
    if received is not None:
        received = _counts("received", received, comm.size)
    algorithm = _begin(comm, "all_to_all_v", algorithm, x, x.shape[1:])
    if received is None:
        received = all_to_all(comm, np.array(sent, np.int64), algorithm).tolist()  # (p,)
    elif comm.debug:
        _check_received(comm, sent, received)
    return _exchange(comm, "all_to_all_v", algorithm, x, sent, received), received


def pairwise(comm, send, recv, sent, received):
    """``recv[received[i]]`` ← rank i's ``send[sent[rank]]`` for every rank i: spans of flat
    buffers, ``sent[j]`` what this rank sends rank j, ``received[i]`` where rank i's rows land.

    The pairwise exchange of Thakur, Rabenseifner & Gropp (2005), MPICH's all-to-all for long
    messages: round k sends to r+k and receives from r−k, so every pair of ranks meets once
    (MPICH pairs r with r XOR k where p is a power of two; the rotation works at any p).
    """
    p, r = comm.size, comm.rank
    (a, b), (c, d) = sent[r], received[r]
    recv[c:d] = send[a:b]  # our own block: a local copy
    for k in range(1, p):
        dest, source = (r + k) % p, (r - k) % p
        (a, b), (c, d) = sent[dest], received[source]
        yield [comm.irecv(recv[c:d], source), comm.isend(send[a:b], dest)]


def _exchange(comm, name: str, algorithm: str, x, sent: list[int], received: list[int]):
    """A new array of ``sum(received)`` rows: ``sent[j]`` rows of ``x`` to rank j, in order,
    and ``received[i]`` rows from rank i, in rank order."""
    xp, row = get_array_module(x), math.prod(x.shape[1:])
    out = xp.empty((sum(received), *x.shape[1:]), x.dtype)  # (Σ received, …)
    send, recv = xp.ascontiguousarray(x).reshape(-1), out.reshape(-1)  # flat views
    if algorithm == "mpi" and name == "all_to_all":
        steps = _mpi(lambda: comm.mpi_alltoall(send, recv))
    elif algorithm == "mpi":
        steps = _mpi(lambda: comm.mpi_alltoallv(send, recv, [c * row for c in sent],
                                                [c * row for c in received]))
    else:
        steps = pairwise(comm, send, recv, spans_of([c * row for c in sent]),
                         spans_of([c * row for c in received]))
    Handle(comm, Wait(f"{name}/{algorithm}", comm.next_seq(), "", x.shape, x.dtype), steps).wait()
    return out


def _begin(comm, name: str, algorithm: str, x, shape) -> str:
    """The algorithm, checked (``"auto"`` becomes ``"pairwise"``); in debug mode the call is
    compared across ranks first (``shape``: what every rank's must equal)."""
    algorithm = resolve(name, algorithm)
    if comm.debug:
        debug.check_call(comm, name, algorithm, x, op=None, root=None, shape=shape)
    return algorithm


def _mpi(call):
    """MPI's own collective as a one-step algorithm (it waits through the Communicator itself)."""
    call()
    yield from ()


def _need_axis(x) -> None:
    if x.ndim == 0:
        raise CommError("all-to-all sends blocks of rows along axis 0: give it a 1-d or larger "
                        "array (x.reshape(1) for a scalar)")


def _counts(what: str, values, p: int) -> list[int]:
    """``values`` as p row counts, whole numbers ≥ 0, or a CommError naming them."""
    try:
        rows = [operator.index(v) for v in values]
    except TypeError:
        rows = None
    if rows is None or len(rows) != p or any(c < 0 for c in rows):
        raise CommError(f"all_to_all_v: {what} needs one whole row count ≥ 0 per rank "
                        f"({p}), got {values!r}")
    return rows


def _check_received(comm, sent: list[int], received: list[int]) -> None:
    """Debug mode: raise :class:`CollectiveMismatch` on every rank unless every rank's
    ``received[i]`` is what rank i sends it (one exchange of every rank's counts)."""
    seen = comm.allgather_obj((sent, received), what="all_to_all_v counts check")
    for j, (_, expects) in enumerate(seen):
        for i, (sends, _) in enumerate(seen):
            if expects[i] != sends[j]:
                raise CollectiveMismatch(f"all_to_all_v: rank {j} expects {expects[i]} rows "
                                         f"from rank {i}, which sends it {sends[j]}")
