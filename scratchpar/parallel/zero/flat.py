"""A group of parameters laid end to end in one flat vector, and each rank's chunk of it."""

from __future__ import annotations

from ...comm.flat import Layout


class Shard:
    """What a rank's optimizer steps: its chunk of a group (``data``, 1-d) and that chunk's
    gradient. Any elementwise optimizer (SGD, momentum, Adam) updates chunks exactly as it
    would update the whole parameters, so ZeRO hands it shards instead."""

    __slots__ = ("data", "grad")

    def __init__(self, data):
        self.data, self.grad = data, None


class FlatGroup(Layout):
    """Parameters of one dtype end to end (a :class:`~scratchpar.comm.flat.Layout`): parameter
    j is ``flat[offsets[j]:offsets[j] + sizes[j]]``, and rank r owns the chunk ``bounds(n,
    N)[r]`` of the n elements, θ[n] → θᵣ[n/N] (Rajbhandari et al. 2020, §5; N need not divide
    n: the first n mod N chunks hold one element more)."""

    def __init__(self, params, ranks: int, rank: int):
        self.params = list(params)
        dtypes = {str(p.dtype) for p in self.params}
        if len(dtypes) > 1:
            raise ValueError(f"a flat group holds one dtype; these parameters have {dtypes}")
        super().__init__([p.shape for p in self.params], self.params[0].dtype)
        self.mine = self.chunk(ranks, rank)
        self.lo, self.hi = self.mine.lo, self.mine.hi

    def bind(self, flat) -> None:
        """Point every parameter's ``data`` at its place in ``flat`` (n,)."""
        for p, view in zip(self.params, self.views(flat)):
            p.data = view

    def owned(self, flat):
        """This rank's chunk of ``flat`` (a view)."""
        return self.mine.of(flat)
