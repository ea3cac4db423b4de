"""Saved arrays swapped out between forward and backward: how ZeRO-3's parameters leave the graph.

The idea of PyTorch's ``torch.autograd.graph.saved_tensors_hooks``. Every op that reads a weight
keeps it for its backward (a matmul keeps W for ∂L/∂x = g·Wᵀ), so a graph that held the gathered
parameter would keep it alive until backward, and freeing it after forward would free nothing
(Rajbhandari et al. 2020, ZeRO, §5.3). Recorded inside ``with recording(SavedArrays(pack,
unpack))``, an op's saved values are packed, and unpacked again for its backward only.
"""

from __future__ import annotations

from collections.abc import Callable

from .tensor import Context, Hooks


class SavedArrays(Hooks):
    """``pack(value)`` sees each attribute an op set on its context as it is recorded and
    returns it, or what stands for it (ZeRO-3: a token for a gathered parameter); ``unpack``
    turns that back into the value, for the time of the op's backward only."""

    def __init__(self, pack: Callable, unpack: Callable) -> None:
        super().__init__()
        self.pack, self.unpack = pack, unpack

    def recorded(self, ctx: Context) -> None:
        ctx.__dict__ = {name: self.pack(value) for name, value in ctx.__dict__.items()}
        ctx.fn = Unpacked(ctx.fn, self.unpack)


class Unpacked:
    """An op's backward that runs on its context's values unpacked, and leaves them packed
    again when it returns: the unpacked arrays go with it."""

    def __init__(self, fn, unpack: Callable) -> None:
        self.fn, self.unpack = fn, unpack

    def backward(self, ctx: Context, g):
        packed = ctx.__dict__
        ctx.__dict__ = {name: self.unpack(value) for name, value in packed.items()}
        try:
            return self.fn.backward(ctx, g)
        finally:
            ctx.__dict__ = packed
