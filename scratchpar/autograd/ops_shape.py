"""Shape and indexing: reshape, permute, slicing, gather, concat, where and masked fill."""

from __future__ import annotations

import itertools

from ..backend import get_array_module
from ..scatter import scatter_add, scatter_rows
from .ops_math import unbroadcast
from .precision import narrow, saturated, weak, wide
from .sums import Partial
from .tensor import Function


class Reshape(Function):
    @staticmethod
    def forward(ctx, a, shape):
        ctx.shape = a.shape
        return a.reshape(shape)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape)


class Permute(Function):
    """Reorder axes; ``axes=None`` reverses them (a transpose)."""

    @staticmethod
    def forward(ctx, a, axes=None):
        axes = tuple(reversed(range(a.ndim))) if axes is None else tuple(ax % a.ndim for ax in axes)
        ctx.inverse = tuple(sorted(range(len(axes)), key=axes.__getitem__))
        return a.transpose(axes)

    @staticmethod
    def backward(ctx, g):
        return g.transpose(ctx.inverse)


def _is_basic(index) -> bool:
    """True for indexes made of ints, slices, None and Ellipsis: no element is selected twice."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(isinstance(p, (int, slice)) or p is None or p is Ellipsis for p in parts)


class GetItem(Function):
    """``a[index]`` for basic and advanced indexes; repeated picks accumulate their grads."""

    @staticmethod
    def forward(ctx, a, index):
        ctx.shape, ctx.dtype, ctx.index = a.shape, a.dtype, index
        return a[index]

    @staticmethod
    def backward(ctx, g):
        if _is_basic(ctx.index):  # zeros but the slice: summed into one buffer (autograd/sums.py)
            return Partial(ctx.shape, ctx.index, g)
        gw = wide(g)  # repeated picks added in fp32 for a 16-bit g
        grad = get_array_module(g).zeros(ctx.shape, dtype=gw.dtype)
        scatter_add(grad, ctx.index, gw)
        return narrow(grad, g.dtype)


class Gather(Function):
    """Row lookup ``weight[ids]``: weight (V, D), ids (...) int → (..., D). An embedding.

    Its gradient adds up the rows of every occurrence of a token, in fp32 for a 16-bit
    gradient: a frequent token's row would otherwise stop growing once each next term falls
    below half an ulp of the sum."""

    @staticmethod
    def forward(ctx, weight, ids):
        ctx.shape, ctx.ids = weight.shape, ids
        return weight[ids]  # (..., D)

    @staticmethod
    def backward(ctx, g):
        gw = wide(g)  # (..., D)
        grad = get_array_module(g).zeros(ctx.shape, dtype=gw.dtype)  # (V, D)
        scatter_rows(grad, ctx.ids.reshape(-1), gw.reshape(-1, ctx.shape[1]))
        return narrow(grad, g.dtype), None


class Concat(Function):
    """Join arrays along ``axis``; the grad is split back at the same boundaries."""

    @staticmethod
    def forward(ctx, *arrays, axis=0):
        xp = get_array_module(*arrays)
        ctx.axis = axis
        ctx.bounds = list(itertools.accumulate(a.shape[axis] for a in arrays))[:-1]
        return xp.concatenate(arrays, axis=axis)

    @staticmethod
    def backward(ctx, g):
        return tuple(get_array_module(g).split(g, ctx.bounds, axis=ctx.axis))


class Where(Function):
    """``cond ? a : b`` elementwise, with a constant boolean ``cond``."""

    @staticmethod
    def forward(ctx, cond, a, b):
        a, b = weak(a, b)  # a Python constant in a bf16 array's dtype, not fp32
        ctx.cond = cond
        ctx.shapes = getattr(a, "shape", ()), getattr(b, "shape", ())
        return get_array_module(cond, a, b).where(cond, a, b)

    @staticmethod
    def backward(ctx, g):
        _, need_a, need_b = ctx.needs_input_grad
        zero = g.dtype.type(0)
        xp = get_array_module(g)
        return (None,
                unbroadcast(xp.where(ctx.cond, g, zero), ctx.shapes[0]) if need_a else None,
                unbroadcast(xp.where(ctx.cond, zero, g), ctx.shapes[1]) if need_b else None)


class MaskedFill(Function):
    """Entries where ``mask`` is true become ``value`` (no grad flows to them); a finite value
    beyond a 16-bit format's range fills its largest finite one (``precision.saturated``)."""

    @staticmethod
    def forward(ctx, a, mask, value):
        xp = get_array_module(a)
        ctx.mask, ctx.shape = mask, a.shape
        return xp.where(mask, saturated(value, a.dtype), a)

    @staticmethod
    def backward(ctx, g):
        xp = get_array_module(g)
        return unbroadcast(xp.where(ctx.mask, g.dtype.type(0), g), ctx.shape), None, None
