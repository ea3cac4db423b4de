"""A group of parameters laid end to end in one flat vector, and each rank's chunk of it."""

from __future__ import annotations

from ...comm.chunks import bounds, offsets


class Shard:
    """What a rank's optimizer steps: its chunk of a group (``data``, 1-d) and that chunk's
    gradient. Any elementwise optimizer (SGD, momentum, Adam) updates chunks exactly as it
    would update the whole parameters, so ZeRO hands it shards instead."""

    __slots__ = ("data", "grad")

    def __init__(self, data):
        self.data, self.grad = data, None


class FlatGroup:
    """Parameters of one dtype end to end: parameter j is ``flat[offsets[j]:offsets[j] +
    sizes[j]]``, and rank r owns the chunk ``bounds(n, N)[r]`` of the n elements, θ[n] →
    θᵣ[n/N] (N need not divide n: the first n mod N chunks hold one element more)."""

    def __init__(self, params, ranks: int, rank: int):
        self.params = list(params)
        dtypes = {str(p.dtype) for p in self.params}
        if len(dtypes) > 1:
            raise ValueError(f"a flat group holds one dtype; these parameters have {dtypes}")
        self.shapes = [tuple(p.shape) for p in self.params]
        self.sizes = [int(p.size) for p in self.params]
        self.offsets = offsets(self.sizes)
        self.n = sum(self.sizes)
        self.dtype = self.params[0].dtype
        self.lo, self.hi = bounds(self.n, ranks)[rank]

    def views(self, flat) -> list:
        """Each parameter's array as a view of the group's flat vector ``flat`` (n,)."""
        return [flat[o:o + s].reshape(shape)
                for o, s, shape in zip(self.offsets, self.sizes, self.shapes)]

    def bind(self, flat) -> None:
        """Point every parameter's ``data`` at its place in ``flat`` (n,)."""
        for p, view in zip(self.params, self.views(flat)):
            p.data = view

    def pack(self, arrays, out) -> None:
        """Lay ``arrays`` (one per parameter; None counts as zeros) end to end in ``out`` (n,)."""
        for a, o, s in zip(arrays, self.offsets, self.sizes):
            if a is None:
                out[o:o + s] = 0
            else:
                out[o:o + s] = a.reshape(-1)

    def flatten(self, xp, arrays):
        """A new flat vector (n,) of ``arrays``, one per parameter."""
        out = xp.empty(self.n, self.dtype)
        self.pack(arrays, out)
        return out

    def owned(self, flat):
        """This rank's chunk of ``flat`` (a view)."""
        return flat[self.lo:self.hi]
