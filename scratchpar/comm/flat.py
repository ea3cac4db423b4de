"""Arrays laid end to end in one flat vector, and that vector's contiguous chunks over p ranks.

Data parallelism's buckets, ZeRO's flat groups and their shards, the parameter servers' key
ranges, Hogwild's window and EASGD's exchanges all lay many arrays out this way: array i is
``flat[offsets[i] : offsets[i] + sizes[i]]``, and rank r of p owns elements ``bounds(n, p)[r]``
of the n, a chunk that may start or end inside an array (Li et al. 2014, ps-lite §3.1;
Rajbhandari et al. 2020, ZeRO §5). Only shapes, sizes and dtypes are known here.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from scratchpar.backend import get_array_module
from scratchpar.comm.chunks import bounds, offsets


class Piece(NamedTuple):
    """Elements ``[start, stop)`` of array i (flattened) lie at ``at`` in a chunk's buffer."""

    i: int
    start: int
    stop: int
    at: int


class Layout:
    """Arrays of ``shapes`` (and one ``dtype``, where given) end to end in ``n`` elements."""

    def __init__(self, shapes, dtype=None):
        self.shapes = [tuple(s) for s in shapes]
        self.sizes = [math.prod(s) for s in self.shapes]
        self.offsets = offsets(self.sizes)
        self.n = sum(self.sizes)
        self.dtype = dtype

    def view(self, flat, i: int):
        """Array i as a view of the flat vector ``flat`` (n,)."""
        o = self.offsets[i]
        return flat[o:o + self.sizes[i]].reshape(self.shapes[i])

    def views(self, flat) -> list:
        """Every array as a view of ``flat`` (n,)."""
        return [self.view(flat, i) for i in range(len(self.shapes))]

    def pack(self, arrays, out, only=None) -> None:
        """Copy ``arrays`` (one per slot, None counting as zeros) into their places in ``out``
        (n,): every one, or those whose indices are in ``only``."""
        for i in range(len(self.shapes)) if only is None else only:
            o, s = self.offsets[i], self.sizes[i]
            out[o:o + s] = 0 if arrays[i] is None else arrays[i].reshape(-1)

    def flatten(self, xp, arrays, dtype=None):
        """A new flat vector (n,) of ``arrays``, in the layout's dtype or ``dtype`` (a 16-bit
        layout's fp32 optimizer state)."""
        out = xp.empty(self.n, self.dtype if dtype is None else dtype)  # (n,)
        self.pack(arrays, out)
        return out

    def unpack(self, flat, out=None) -> list:
        """The arrays back out of ``flat`` (n,): as new arrays, or written into ``out``."""
        if out is None:
            return [v.copy() for v in self.views(flat)]
        for o, v in zip(out, self.views(flat)):
            o[...] = v
        return out

    def chunk(self, p: int, r: int) -> Chunk:
        """Chunk r of p: the elements rank (or server) r owns."""
        return Chunk(self, *bounds(self.n, p)[r])

    def chunks(self, p: int) -> list[Chunk]:
        """All p chunks, in order: they tile the n elements (empty ones when n < p)."""
        return [Chunk(self, lo, hi) for lo, hi in bounds(self.n, p)]


class Chunk:
    """Elements ``[lo, hi)`` of a layout's flat vector, and the ``pieces`` of each array that fall
    in it, in order, so a chunk of per-array data is gathered or scattered without the rest."""

    def __init__(self, layout: Layout, lo: int, hi: int):
        self.lo, self.hi, self.size = lo, hi, hi - lo
        self.pieces = []
        for i, (o, s) in enumerate(zip(layout.offsets, layout.sizes)):
            start, stop = max(lo, o), min(hi, o + s)
            if start < stop:
                self.pieces.append(Piece(i, start - o, stop - o, start - lo))

    def of(self, flat):
        """This chunk of the flat vector ``flat`` (n,), a view (hi − lo,)."""
        return flat[self.lo:self.hi]

    def gather(self, arrays):
        """The chunk's elements of ``arrays`` (one per slot) as one new buffer (hi − lo,)."""
        xp = get_array_module(*arrays)
        out = xp.empty(self.size, dtype=arrays[0].dtype)  # (hi − lo,)
        for i, start, stop, at in self.pieces:
            out[at:at + stop - start] = arrays[i].reshape(-1)[start:stop]
        return out

    def scatter(self, buf, arrays) -> None:
        """Write ``buf`` (hi − lo,) back into the chunk's elements of ``arrays``, in place (each
        array contiguous, so that its flat view is the array itself)."""
        for i, start, stop, at in self.pieces:
            arrays[i].reshape(-1)[start:stop] = buf[at:at + stop - start]
