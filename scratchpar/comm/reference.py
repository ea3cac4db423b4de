"""What every collective computes, stated over a plain list of per-rank blocks: the tests' oracle.

``blocks[i]`` is rank i's input and each function returns the list of every rank's output.
Rows are split and joined along axis 0, rank i taking rows ``chunks.bounds(n, p)[i]``. For p = 2:

>>> blocks = [np.array([1, 2, 3]), np.array([10, 20, 30])]
>>> all_reduce(blocks, "sum")
[array([11, 22, 33]), array([11, 22, 33])]
>>> reduce_scatter(blocks, "sum")
[array([11, 22]), array([33])]
>>> all_gather(blocks)
[array([ 1,  2,  3, 10, 20, 30]), array([ 1,  2,  3, 10, 20, 30])]
>>> scatter(blocks, root=1)
[array([10, 20]), array([30])]
>>> all_to_all([np.array([1, 2]), np.array([10, 20])])
[array([ 1, 10]), array([ 2, 20])]
>>> all_to_all_v(blocks, counts=[[1, 2], [3, 0]])
[(array([ 1, 10, 20, 30]), [1, 3]), (array([2, 3]), [2, 0])]
"""

from __future__ import annotations

import functools

import numpy as np

from scratchpar.comm.chunks import bounds
from scratchpar.comm.errors import CommError
from scratchpar.comm.ops import check_op

COMBINE = {"sum": np.add, "avg": np.add, "max": np.maximum, "min": np.minimum}


def reduced(blocks, op: str):
    """``blocks[0] ⊕ blocks[1] ⊕ … ⊕ blocks[p−1]``; ``avg`` is the sum divided by p."""
    check_op(op, blocks[0].dtype)
    total = functools.reduce(COMBINE[op], blocks)
    return total / len(blocks) if op == "avg" else total.copy()


def all_reduce(blocks, op: str = "sum"):
    """Every rank gets the reduction of all blocks."""
    total = reduced(blocks, op)
    return [total.copy() for _ in blocks]


def reduce_scatter(blocks, op: str = "sum"):
    """Rank i gets rows ``bounds(n, p)[i]`` of the reduction (every block has n rows)."""
    total = reduced(blocks, op)
    return [total[a:b].copy() for a, b in bounds(len(total), len(blocks))]


def all_gather(blocks):
    """Every rank gets all blocks joined along axis 0 in rank order (row counts may differ)."""
    joined = np.concatenate(blocks)
    return [joined.copy() for _ in blocks]


def broadcast(blocks, root: int = 0):
    """Every rank gets the root's block."""
    return [blocks[root].copy() for _ in blocks]


def reduce(blocks, op: str = "sum", root: int = 0):
    """The root gets the reduction of all blocks; every other rank gets ``None``."""
    total = reduced(blocks, op)
    return [total if i == root else None for i in range(len(blocks))]


def gather(blocks, root: int = 0):
    """The root gets all blocks joined along axis 0 in rank order; every other rank ``None``."""
    joined = np.concatenate(blocks)
    return [joined if i == root else None for i in range(len(blocks))]


def scatter(blocks, root: int = 0):
    """Rank i gets rows ``bounds(n, p)[i]`` of the root's block (the others' blocks are unused)."""
    full = blocks[root]
    return [full[a:b].copy() for a, b in bounds(len(full), len(blocks))]


def all_to_all(blocks):
    """Rank j gets block j of every rank's p equal blocks (along axis 0), joined in rank order."""
    p = len(blocks)
    return [np.concatenate([np.split(b, p)[j] for b in blocks]) for j in range(p)]


def all_to_all_v(blocks, counts):
    """Rank i's rows go out in order, ``counts[i][j]`` of them to rank j. Rank j gets
    ``(rows, received)``: every rank's rows for it joined in rank order, and
    ``received[i] = counts[i][j]``."""
    for i, (b, c) in enumerate(zip(blocks, counts)):
        if sum(c) != len(b):
            raise CommError(f"rank {i}'s counts {c} do not sum to its {len(b)} rows")
    pieces = [np.split(b, np.cumsum(c)[:-1]) for b, c in zip(blocks, counts)]
    return [(np.concatenate([piece[j] for piece in pieces]), [c[j] for c in counts])
            for j in range(len(blocks))]
