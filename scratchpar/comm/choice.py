"""Which algorithm a collective runs: the names each one accepts, and what ``"auto"`` picks."""

from __future__ import annotations

import numpy as np

from scratchpar.comm import doubling, rabenseifner, ring, tree
from scratchpar.comm.errors import CommError

ALGORITHMS = {
    "all_reduce": ("auto", "ring", "recursive_doubling", "rabenseifner", "tree", "mpi"),
    "reduce_scatter": ("auto", "ring", "mpi"),
    "reduce_scatter_start": ("auto", "ring"),
    "all_gather": ("auto", "ring", "mpi"),
    "all_gather_start": ("auto", "ring"),
    "broadcast": ("auto", "tree", "mpi"),
    "reduce": ("auto", "tree", "mpi"),
    "gather": ("auto", "linear", "mpi"),
    "scatter": ("auto", "linear", "mpi"),
    "all_to_all": ("auto", "pairwise", "mpi"),
    "all_to_all_v": ("auto", "pairwise", "mpi"),
}
ALL_REDUCE = {"ring": ring, "recursive_doubling": doubling, "rabenseifner": rabenseifner,
              "tree": tree}
# "auto" of a collective with one hand-written algorithm
ONLY = {"reduce_scatter": "ring", "all_gather": "ring", "reduce_scatter_start": "ring",
        "all_gather_start": "ring", "broadcast": "tree", "reduce": "tree", "gather": "linear",
        "scatter": "linear", "all_to_all": "pairwise", "all_to_all_v": "pairwise"}


def resolve(name: str, algorithm: str) -> str:
    """``algorithm`` for the collective ``name``, checked; ``"auto"`` becomes the collective's
    one hand-written algorithm, but an all-reduce's stays: its buffer decides
    (:func:`auto_all_reduce`)."""
    if algorithm not in ALGORITHMS[name]:
        raise CommError(f"{name}: algorithm must be one of {ALGORITHMS[name]}, got {algorithm!r}")
    return ONLY.get(name, algorithm) if algorithm == "auto" else algorithm


def auto_all_reduce(nbytes: int, p: int) -> str:
    """Recursive doubling up to the measured crossover; above it Rabenseifner's halving and
    doubling where p is a power of two, else the ring.

    ``python -m scratchpar.bench collectives`` on the 2-core development machine: recursive
    doubling beats the ring up to 1 MiB at p = 2, where both send N bytes a rank and doubling
    starts one message instead of two; at p = 4 up to 128 KiB, the two even at 256 KiB and the
    ring 1.5× faster at 1 MiB; at p = 3 up to 256 KiB, where folding the odd rank in costs two
    more whole-buffer steps. The α-β model puts p = 8's crossover within 10% of p = 4's
    (docs/collectives.md, "Latency against bandwidth"). Above it, at p = 4, Rabenseifner's
    sends the ring's bytes in 4 messages instead of 6: 0.97× MPICH's time at 1 MiB and 4 MiB
    against the ring's 1.13× and 1.11×, 0.49× at 16 MiB against 0.52×; with p not a power of
    two its fold costs two more whole buffers, and the ring keeps those.
    """
    if nbytes <= doubling_up_to(p):
        return "recursive_doubling"
    return "rabenseifner" if p & (p - 1) == 0 else "ring"


def doubling_up_to(p: int) -> int:
    """The largest message (bytes) that :func:`auto_all_reduce` gives recursive doubling."""
    return 1 << 20 if p == 2 else 256 << 10


def staged_once(comm, buf, algorithm: str) -> bool:
    """Whether a device ``buf`` that MPI cannot read goes to the host once for the whole
    all-reduce (``staging.twin``) instead of once per message: where recursive doubling is the
    choice (:func:`auto_all_reduce`), latency decides, and a staged step's copy and stream wait
    are most of it. On an H200 under MPS a staged message took 23 µs one way against 2.7 µs
    between host arrays, the copy to the host 10 µs of it (docs/devices.md, "On a GPU a fifth
    time"). MPI's own collective stages itself."""
    return (not isinstance(buf, np.ndarray) and comm.size > 1
            and not comm.cuda_aware and algorithm != "mpi"
            and buf.nbytes <= doubling_up_to(comm.size))
