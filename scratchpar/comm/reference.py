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
"""

from __future__ import annotations

import functools

import numpy as np

from scratchpar.comm.chunks import bounds
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
