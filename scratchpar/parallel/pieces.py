"""A rank's pieces of the one-device state: each a block of one whole array, named by the
array's one-device name and where the block lies in it. A sharded checkpoint is these pieces,
written by the ranks that hold them; a run at another layout fills what it will hold from
whichever pieces overlap it (the idea of Megatron's distributed checkpoints and PyTorch's DCP).

A block is a box in a *view* of the whole array: the whole reshaped, C order kept, so that a
box of the view is a set of its elements. A replica's array is the full box of its own shape.
A ZeRO chunk of an array is a range of its flat view ``(n,)``. A tensor-parallel shard is a box
of the view its split names (a fused QKV weight W[C,3C] by heads: ``(C, 3, H, d)``, heads
``h_t`` on rank t). The piece's array holds the box's elements in C order, shaped as the box.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Block:
    """The box ``[offsets, offsets + shape)`` of an array of shape ``whole`` seen as ``view``."""

    whole: tuple[int, ...]
    view: tuple[int, ...]
    offsets: tuple[int, ...]
    shape: tuple[int, ...]

    @classmethod
    def full(cls, whole) -> Block:
        """The whole array."""
        whole = tuple(int(n) for n in whole)
        return cls(whole, whole, (0,) * len(whole), whole)

    @classmethod
    def flat(cls, whole, start: int, stop: int) -> Block:
        """Elements ``[start, stop)`` of the array raveled (a ZeRO chunk's part of it)."""
        whole = tuple(int(n) for n in whole)
        return cls(whole, (math.prod(whole),), (int(start),), (int(stop) - int(start),))

    @classmethod
    def cut(cls, whole, view, axis: int, start: int, stop: int) -> Block:
        """``[start, stop)`` along ``axis`` of ``view`` (a tensor-parallel shard)."""
        view = tuple(int(n) for n in view)
        offsets, shape = [0] * len(view), list(view)
        offsets[axis], shape[axis] = int(start), int(stop) - int(start)
        return cls(tuple(int(n) for n in whole), view, tuple(offsets), tuple(shape))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def is_full(self) -> bool:
        return self.shape == self.view

    def problems(self) -> list[str]:
        """What makes this block impossible: a view of another size, a box outside it."""
        out = []
        if math.prod(self.view) != math.prod(self.whole):
            out.append(f"view {self.view} does not hold the {self.whole} array's elements")
        if not len(self.offsets) == len(self.shape) == len(self.view) or any(
                o < 0 or s < 0 or o + s > v
                for o, s, v in zip(self.offsets, self.shape, self.view)):
            out.append(f"box at {self.offsets} of shape {self.shape} is not inside {self.view}")
        return out

    def box(self) -> tuple[slice, ...]:
        return tuple(slice(o, o + s) for o, s in zip(self.offsets, self.shape))

    def take(self, whole):
        """This block of the ``whole`` array (a view where the box is contiguous)."""
        return whole.reshape(self.view)[self.box()]

    def indices(self) -> np.ndarray:
        """The raveled positions of the block's elements in the whole array, in C order (so
        ascending): the common ground of two blocks cut from different views."""
        grid = np.meshgrid(*[np.arange(o, o + s) for o, s in zip(self.offsets, self.shape)],
                           indexing="ij")
        return np.ravel_multi_index([g.ravel() for g in grid], self.view)

    def span(self) -> tuple[int, int]:
        """The first and one past the last raveled position the block touches."""
        if self.size == 0:
            return 0, 0
        first = np.ravel_multi_index(self.offsets, self.view)
        last = np.ravel_multi_index([o + s - 1 for o, s in zip(self.offsets, self.shape)],
                                    self.view)
        return int(first), int(last) + 1


def fill(target: Block, out: np.ndarray, stored, what: str) -> None:
    """Fill ``out`` (``target.shape``) with the ``target`` block from the ``stored`` pieces
    that overlap it: ``(block, load)`` pairs whose ``load()`` reads the piece's array. Raises
    ValueError, naming ``what``, if the pieces leave any element of the target unfilled."""
    covered = np.zeros(target.shape, dtype=bool)
    lo_t, hi_t = target.span()
    want = None  # the target's raveled positions, where a piece of another view needs them
    for block, load in stored:
        lo, hi = block.span()
        if hi <= lo_t or hi_t <= lo or block.size == 0 or target.size == 0:
            continue
        if block.view == target.view:
            lo_box = [max(a, b) for a, b in zip(block.offsets, target.offsets)]
            hi_box = [min(a + s, b + t) for a, s, b, t in
                      zip(block.offsets, block.shape, target.offsets, target.shape)]
            if any(b <= a for a, b in zip(lo_box, hi_box)):  # boxes apart along an axis
                continue
            mine = tuple(slice(a - o, b - o) for a, b, o in zip(lo_box, hi_box, target.offsets))
            theirs = tuple(slice(a - o, b - o) for a, b, o in zip(lo_box, hi_box, block.offsets))
            out[mine] = load()[theirs]
            covered[mine] = True
        elif block.is_full:  # a whole array: any box of any view is a slice of it
            out[...] = target.take(load().reshape(target.whole))
            covered[...] = True
        else:  # blocks of two views: matched element by element
            want = target.indices() if want is None else want
            have = block.indices()
            at = np.minimum(np.searchsorted(have, want), have.size - 1)
            hit = have[at] == want
            out.reshape(-1)[hit] = load().reshape(-1)[at[hit]]
            covered.reshape(-1)[hit] = True
    if not covered.all():
        raise ValueError(f"{what}: the checkpoint holds {int(covered.sum())} of the "
                         f"{target.size} elements of the block this rank needs")


@dataclass(frozen=True)
class Piece:
    """A block of the one-device state's array ``name`` in section ``part`` ("model",
    "optim", a rank's own "rank3.model"…), and this rank's ``array`` of it (on its device)."""

    part: str
    name: str
    block: Block
    array: object


def split_state(state: dict) -> tuple[dict[str, dict], dict[str, dict]]:
    """A one-device state (``{part: {name: array or scalar}}``) as its arrays and its scalars
    (0-d arrays, numbers, ``None``), each by part."""
    arrays = {part: {k: v for k, v in named.items() if getattr(v, "ndim", 0) > 0}
              for part, named in state.items()}
    scalars = {part: {k: v.item() if hasattr(v, "item") else v for k, v in named.items()
                      if k not in arrays[part]} for part, named in state.items()}
    return arrays, scalars


def whole_pieces(state: dict) -> tuple[list[Piece], dict[str, dict]]:
    """A one-device state as full pieces, and its scalars by part (:func:`split_state`)."""
    arrays, scalars = split_state(state)
    return [Piece(part, name, Block.full(a.shape), a)
            for part, named in arrays.items() for name, a in named.items()], scalars


def shared_out(pieces: list[Piece], rank: int, size: int) -> list[Piece]:
    """This rank's share of ``pieces`` that every rank holds alike (a replica's whole state):
    each piece to the rank that has written the fewest bytes so far, biggest first, so the
    ranks write in parallel and near-equal amounts, and every piece once."""
    load = [0] * size
    mine = []
    for piece in sorted(pieces, key=lambda p: (-p.block.size * p.array.itemsize, p.part, p.name)):
        writer = load.index(min(load))
        load[writer] += piece.block.size * piece.array.itemsize
        if writer == rank:
            mine.append(piece)
    return mine


def replica_pieces(model, optimizer, comm) -> tuple[list[Piece], dict[str, dict]]:
    """A replica's whole state, its live arrays (no copy), of which this rank of ``comm``
    (``None``: one device) writes its share (:func:`shared_out`); every rank holds it alike."""
    pieces, scalars = whole_pieces({"model": model.state_dict(), "optim": optimizer.entries()})
    rank, size = (0, 1) if comm is None else (comm.rank, comm.size)
    return shared_out(pieces, rank, size), scalars
