"""How a tensor-parallel parameter relates to the whole one: split, replicated, or replicated
with a partial gradient. Checkpoints gather shards back and reshard them through these.

A tensor-parallel module lists its parameters' layouts in ``tp_layouts`` (attribute name →
layout). A parameter it does not list is replicated, and every rank of the tp group computes
its whole gradient alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...backend import get_array_module
from ...comm.chunks import bounds, counts
from ...nn import unfilled
from ...nn.module import Parameter
from ..pieces import Block

PARTIAL = "partial"  # replicated, but each rank's gradient is a part: the group sums them


@dataclass(frozen=True)
class Split:
    """Rank t holds ``bounds(n, T)[t]`` of the whole along ``axis`` of ``view``, the whole
    tensor seen in that shape (default: its own shape), where the view splits one of the
    tensor's axes into several. A fused QKV weight W[C,3C] split by heads is
    ``Split(axis=2, view=(C, 3, H, d))``: rank t holds W[C,3·h_t·d], its h_t heads of q, k and
    v. The projection after attention, W[C,C] split by heads along its rows, is
    ``Split(axis=0, view=(H, d, C))``: W[h_t·d,C]."""

    axis: int
    view: tuple[int, ...] | None = None

    def take(self, whole, rank: int, size: int):
        """Rank ``rank``'s shard of the ``whole`` array: a new C-ordered array, or where
        ``whole`` is unfilled (``nn.deferred()``), an unfilled one that draws the shard alone."""
        return unfilled.part(whole, self.block(whole.shape, rank, size),
                             self.shard_shape(whole.shape, rank, size))

    def block(self, shape: tuple[int, ...], rank: int, size: int) -> Block:
        """Where rank ``rank``'s shard lies in the whole tensor of ``shape``: the box
        :meth:`take` cuts, of the view (a checkpoint's piece of it)."""
        view = self.view or tuple(shape)
        start, stop = bounds(view[self.axis], size)[rank]
        return Block.cut(shape, view, self.axis, start, stop)

    def join(self, parts: list):
        """The whole array from every rank's shard, in rank order."""
        xp = get_array_module(parts[0])
        if self.view is None:
            return xp.concatenate(parts, axis=self.axis)
        view, pieces = list(self.view), []
        for n, part in zip(counts(self.view[self.axis], len(parts)), parts):
            view[self.axis] = n
            pieces.append(part.reshape(view))
        shape = list(parts[0].shape)
        k = self._tensor_axis(shape)
        shape[k] = math.prod(self.view) // math.prod(shape[:k] + shape[k + 1:])
        return xp.concatenate(pieces, axis=self.axis).reshape(shape)

    def shard_shape(self, shape: tuple[int, ...], rank: int, size: int) -> tuple[int, ...]:
        """The shape of rank ``rank``'s shard of a whole tensor of ``shape``."""
        view = list(self.view or shape)
        whole, share = view[self.axis], counts(view[self.axis], size)[rank]
        if self.view is None:
            view[self.axis] = share
            return tuple(view)
        out = list(shape)
        k = self._tensor_axis(shape)
        out[k] = shape[k] // whole * share
        return tuple(out)

    def _tensor_axis(self, shape) -> int:
        """The tensor's axis k that the view splits into view[k : k+extra+1], with the split
        axis among them (the axes before and after are the tensor's own)."""
        extra = len(self.view) - len(shape)
        return next(k for k in range(len(shape)) if k <= self.axis <= k + extra
                    and self.view[:k] == tuple(shape[:k])
                    and self.view[k + extra + 1:] == tuple(shape[k + 1:]))


def layouts(module) -> dict[str, object]:
    """Every parameter of ``module`` by its name there → ``Split``, ``PARTIAL`` or ``None``
    (replicated, with the whole gradient on every rank)."""
    out = {}
    for prefix, sub in module.named_modules():
        own = getattr(sub, "tp_layouts", {})
        for attr, value in vars(sub).items():
            if isinstance(value, Parameter):
                out.setdefault(f"{prefix}.{attr}" if prefix else attr, own.get(attr))
    return {name: out[name] for name, _ in module.named_parameters()}
