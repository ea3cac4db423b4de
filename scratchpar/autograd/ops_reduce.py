"""Reductions over axes: sum, mean and max, whose grads spread back over the reduced axes.

A 16-bit input's sum and mean are added in fp32 and rounded once to its dtype (Micikevicius
et al. 2018, §3.3: large reductions in fp32); NumPy would add them in 16 bits.
"""

from __future__ import annotations

from ..backend import get_array_module
from .precision import WIDE, is_low, narrow, total
from .tensor import Function


def reduction(ctx, a, axis) -> tuple:
    """Record the input shape and the reduced axes; returns the axes as a sorted tuple."""
    ctx.shape = a.shape
    ctx.axes = axes = tuple(range(a.ndim)) if axis is None else tuple(
        sorted(ax % a.ndim for ax in ((axis,) if isinstance(axis, int) else axis)))
    ctx.kept = tuple(1 if i in axes else n for i, n in enumerate(a.shape))  # keepdims shape
    return axes


def spread(ctx, g):
    """The reduced ``g`` repeated over the reduced axes: a fresh array of the input's shape.

    A fresh array rather than a broadcast view: a leaf would copy the view anyway, and
    ``broadcast_to`` alone costs more than filling a small array.
    """
    out = get_array_module(g).empty(ctx.shape, dtype=g.dtype)
    out[...] = g.reshape(ctx.kept)
    return out


class Sum(Function):
    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        return total(a, axis=reduction(ctx, a, axis), keepdims=keepdims)

    @staticmethod
    def backward(ctx, g):
        return spread(ctx, g)


class Mean(Function):
    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        adds_in = WIDE if is_low(a.dtype) else None  # None: NumPy's own accumulator
        out = narrow(a.mean(axis=reduction(ctx, a, axis), keepdims=keepdims, dtype=adds_in),
                     a.dtype)
        ctx.count = a.size // max(out.size, 1) if a.size else 1
        return out

    @staticmethod
    def backward(ctx, g):
        return spread(ctx, g / ctx.count)


class Max(Function):
    """Max over axes; tied maxima share the gradient equally, in the input's dtype."""

    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        axes = reduction(ctx, a, axis)
        out = a.max(axis=axes, keepdims=True)
        mask = a == out
        ctx.weights = (mask / mask.sum(axis=axes, keepdims=True)).astype(a.dtype)  # in a's dtype
        return out if keepdims else out.reshape([n for i, n in enumerate(a.shape) if i not in axes])

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.kept) * ctx.weights
