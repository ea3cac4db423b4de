"""Dropout on activations split across a tp group, equal to one device's dropout on the whole.

One device draws the mask of the whole activation from its stream, in C order. Every rank of
a tp group holds the same stream (same seed, same position), so each draws the values of its
own slice of that whole mask, skipping the rest: the counter-based stream (``device_rng``)
draws each position of the slice alone, in one pass, and ends past the whole draw, in step
with the other ranks. The mask in memory is this rank's slice only. Where the activation is
replicated (after g), the ordinary ``nn.Dropout`` draws the same whole mask on every rank
and agrees.
"""

from __future__ import annotations

import abc
import math

from ...autograd import functional as F
from ...comm.chunks import bounds
from ...nn.layers import Dropout


class SplitDropout(Dropout, abc.ABC):
    """(…, n_r, …) → (…, n_r, …): this rank's slice [start, stop) along ``axis`` of a whole
    activation of n along it, masked as one device masks the whole. Subclasses say how a rank
    learns n and its slice (``extent``)."""

    axis = 1

    def __init__(self, p: float, comm):
        super().__init__(p)
        self.comm = comm

    @abc.abstractmethod
    def extent(self, x) -> tuple[int, int]:
        """(n, start): the whole length along ``axis`` and where this rank's slice starts."""

    def forward(self, x):
        if self.gen is None or not self.training or self.p == 0.0:
            return super().forward(x)  # the identity, or the missing generator's error
        n, start = self.extent(x)
        whole = (*x.shape[:self.axis], n, *x.shape[self.axis + 1:])
        return F.dropout(x, self.p, Window(self.gen, whole, self.axis, start))


class HeadDropout(SplitDropout):
    """(B, h_r, T, T) attention probabilities, this rank's heads of H (``chunks.bounds``), or
    with G key/value groups of r > 1 query heads each, (B, r, g_r, T, T), this rank's groups
    of G (``nn.attention.attend``): the whole count is known when the layer is built."""

    def __init__(self, p: float, comm, groups: int, per_group: int = 1):
        super().__init__(p, comm)
        self.groups, self.axis = groups, 1 if per_group == 1 else 2

    def extent(self, x) -> tuple[int, int]:
        return self.groups, bounds(self.groups, self.comm.size)[self.comm.rank][0]


class SequenceDropout(SplitDropout):
    """(B, T_r, C) sequence shards (Korthikanti et al. 2022, §4.2): the whole length T is the
    sum of the shards' lengths, which the ranks exchange (a small metadata all-gather)."""

    def extent(self, x) -> tuple[int, int]:
        rows = self.comm.allgather_obj(x.shape[self.axis], "sequence shard lengths")
        return sum(rows), sum(rows[:self.comm.rank])


class Window:
    """The slice [start, start + width) along ``axis`` of one mask of ``whole`` from ``gen``,
    drawn alone: a stand-in for ``gen`` in ``F.dropout``, which asks for the slice's mask."""

    def __init__(self, gen, whole: tuple[int, ...], axis: int, start: int):
        self.gen, self.whole, self.axis, self.start = gen, whole, axis, start

    def keep(self, shape, p: float, xp):
        outer, n = math.prod(self.whole[:self.axis]), self.whole[self.axis]
        inner = math.prod(self.whole[self.axis + 1:])
        run = shape[self.axis] * inner  # one contiguous run of the slice per outer index
        starts = (xp.arange(outer, dtype=xp.uint64) * n + self.start) * inner  # (outer,)
        offsets = starts[:, None] + xp.arange(run, dtype=xp.uint64)  # (outer, width·inner)
        out = self.gen.keep_at(offsets, p)
        self.gen.position += outer * n * inner  # past the whole draw, as one device
        return out.reshape(shape)
