"""Elementwise arithmetic, matmul and pointwise nonlinearities, with broadcasting-correct grads.

On 16-bit arrays, an op of one step runs in their dtype (NumPy computes each float16 or
bfloat16 ufunc in fp32 and rounds its result once). An op of several steps (GELU, sigmoid, the
derivatives of tanh and sigmoid, ReLU's mask) runs in fp32 and rounds once, as a GPU kernel
computes in registers: one rounding instead of one a step, and NumPy's float16 arithmetic is
slower than the round trip to fp32. Products accumulate in fp32 (``precision.product``).
"""

from __future__ import annotations

import math

import numpy as np

from ..backend import get_array_module
from .precision import narrow, product, total, weak, wide
from .tensor import Function


def shape_of(x) -> tuple:
    return getattr(x, "shape", ())


def unbroadcast(grad, shape: tuple):
    """Sum ``grad`` over the axes that broadcasting stretched, back to ``shape`` (added in
    fp32 for a 16-bit ``grad``: a bias's gradient sums every row of the batch)."""
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    stretched = tuple(lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1)
    grad = total(grad, axis=tuple(range(lead)) + stretched, keepdims=True)
    return grad.reshape(shape)


class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        a, b = weak(a, b)  # a Python constant in a bf16 array's dtype, not fp32
        ctx.shapes = shape_of(a), shape_of(b)
        return a + b

    @staticmethod
    def backward(ctx, g):
        need_a, need_b = ctx.needs_input_grad
        return (unbroadcast(g, ctx.shapes[0]) if need_a else None,
                unbroadcast(g, ctx.shapes[1]) if need_b else None)


class Sub(Function):
    @staticmethod
    def forward(ctx, a, b):
        a, b = weak(a, b)
        ctx.shapes = shape_of(a), shape_of(b)
        return a - b

    @staticmethod
    def backward(ctx, g):
        need_a, need_b = ctx.needs_input_grad
        return (unbroadcast(g, ctx.shapes[0]) if need_a else None,
                unbroadcast(-g, ctx.shapes[1]) if need_b else None)


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        a, b = weak(a, b)
        need_a, need_b = ctx.needs_input_grad  # each side saved only for the other's gradient
        ctx.shapes = shape_of(a), shape_of(b)
        ctx.a, ctx.b = (a if need_b else None), (b if need_a else None)
        return a * b

    @staticmethod
    def backward(ctx, g):
        need_a, need_b = ctx.needs_input_grad
        return (unbroadcast(g * ctx.b, ctx.shapes[0]) if need_a else None,
                unbroadcast(g * ctx.a, ctx.shapes[1]) if need_b else None)


class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        a, b = weak(a, b)
        ctx.shapes = shape_of(a), shape_of(b)
        ctx.a, ctx.b = (a if ctx.needs_input_grad[1] else None), b  # a only for b's gradient
        return a / b

    @staticmethod
    def backward(ctx, g):
        need_a, need_b = ctx.needs_input_grad
        ga = g / ctx.b
        return (unbroadcast(ga, ctx.shapes[0]) if need_a else None,
                unbroadcast(-ga * ctx.a / ctx.b, ctx.shapes[1]) if need_b else None)


class Neg(Function):
    @staticmethod
    def forward(ctx, a):
        return -a

    @staticmethod
    def backward(ctx, g):
        return -g


class Pow(Function):
    """``a ** b``; the gradient for ``b`` (a**b · ln a) needs ``a > 0``."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.a, ctx.b = a, b = weak(a, b)
        ctx.out = out = a**b
        return out

    @staticmethod
    def backward(ctx, g):
        need_a, need_b = ctx.needs_input_grad
        a, b = ctx.a, ctx.b
        ga = gb = None
        if need_a:
            ga = unbroadcast(g * b * a ** (b - 1), shape_of(a))
        if need_b:
            gb = unbroadcast(g * ctx.out * get_array_module(a).log(a), shape_of(b))
        return ga, gb


class Cast(Function):
    """``a`` in ``dtype``; its gradient goes back in ``a``'s own dtype (a 16-bit model's output
    widened to fp32 for its loss)."""

    @staticmethod
    def forward(ctx, a, dtype):
        ctx.dtype = a.dtype
        return a.astype(dtype)

    @staticmethod
    def backward(ctx, g):
        return g.astype(ctx.dtype)


class MatMul(Function):
    """Batched ``a @ b``: (..., M, K) @ (..., K, N) → (..., M, N), batch dims broadcast; each
    product accumulated in fp32 for 16-bit operands (``precision.product``)."""

    @staticmethod
    def forward(ctx, a, b):
        if a.ndim < 2 or b.ndim < 2:
            raise ValueError(f"matmul needs operands of 2+ dims, got {a.shape} @ {b.shape}")
        need_a, need_b = ctx.needs_input_grad  # each side saved only for the other's gradient
        ctx.shapes = a.shape, b.shape
        ctx.a, ctx.b = (a if need_b else None), (b if need_a else None)
        return product(a, b)

    @staticmethod
    def backward(ctx, g):
        need_a, need_b = ctx.needs_input_grad
        (a_shape, b_shape), a, b = ctx.shapes, ctx.a, ctx.b
        ga = gb = None
        if need_a:
            ga = unbroadcast(product(g, b.swapaxes(-1, -2)), a_shape)
        if need_b:
            if len(b_shape) == 2:  # fold the batch into M: one (K, B·M) @ (B·M, N) product
                rows = math.prod(a_shape[:-1])  # explicit: reshape(-1, 0) is ambiguous
                gb = product(a.reshape(rows, a_shape[-1]).T, g.reshape(rows, g.shape[-1]))
            else:
                gb = unbroadcast(product(a.swapaxes(-1, -2), g), b_shape)
        return ga, gb


class Exp(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.out = out = get_array_module(a).exp(a)
        return out

    @staticmethod
    def backward(ctx, g):
        return g * ctx.out


class Log(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.a = a
        return get_array_module(a).log(a)

    @staticmethod
    def backward(ctx, g):
        return g / ctx.a


class Tanh(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.out = out = get_array_module(a).tanh(a)
        return out

    @staticmethod
    def backward(ctx, g):
        out = wide(ctx.out)
        return narrow(wide(g) * (1 - out * out), g.dtype)


class Sigmoid(Function):
    """σ(a) = ½(1 + tanh ½a), stable for large |a|; in fp32 for a 16-bit ``a`` and rounded
    once: for a ≪ 0, 1 + tanh cancels, and a 16-bit tanh near −1 leaves σ no correct digit."""

    @staticmethod
    def forward(ctx, a):
        xp = get_array_module(a)
        ctx.out = out = narrow(0.5 * (xp.tanh(0.5 * wide(a)) + 1), a.dtype)
        return out

    @staticmethod
    def backward(ctx, g):
        out = wide(ctx.out)
        return narrow(wide(g) * out * (1 - out), g.dtype)


class ReLU(Function):
    """max(a, 0). A 16-bit array is masked in fp32: NumPy multiplies a float16 or bfloat16
    array by a boolean one about twice as slowly as the round trip to fp32 and back."""

    @staticmethod
    def forward(ctx, a):
        ctx.mask = mask = a > 0
        return narrow(wide(a) * mask, a.dtype)  # faster than maximum(a, 0), far than where

    @staticmethod
    def backward(ctx, g):
        return narrow(wide(g) * ctx.mask, g.dtype)


class GELU(Function):
    """GELU, tanh approximation (Hendrycks & Gimpel 2016, eq. in §2), as in GPT-2.

    ½·a·(1 + tanh u) with u = √(2/π)·(a + 0.044715·a³) equals a·σ(2u): the sigmoid form costs
    one exp instead of a tanh, and its derivative is σ·(1 + a·(1 − σ)·2u′).

    A 16-bit ``a`` is computed in fp32 and the result rounded once, as a GPU kernel computes in
    registers: nine steps each rounded to 16 bits would add up their errors, and NumPy runs
    float16 arithmetic about 40 times slower than fp32's (bfloat16's about 10). σ is saved in
    ``a``'s dtype.
    """

    C = 0.7978845608028654  # sqrt(2 / pi)
    K = 0.044715

    @staticmethod
    def forward(ctx, a):
        xp = get_array_module(a)
        aw = wide(a)
        s = xp.asarray(aw * aw)  # an array even when a is 0-d, so that exp can work in place
        s *= GELU.K
        s += 1
        s *= aw
        s *= -2 * GELU.C  # −2u, each step in place: no temporaries
        with np.errstate(over="ignore", under="ignore"):  # e^{−2u} = inf for a ≪ 0: σ = 0
            xp.exp(s, out=s)
        s += 1
        xp.reciprocal(s, out=s)  # σ(2u) = ½(1 + tanh u)
        ctx.a, ctx.s = a, narrow(s, a.dtype)
        return narrow(aw * s, a.dtype)

    @staticmethod
    def backward(ctx, g):
        a, s = wide(ctx.a), wide(ctx.s)
        grad = a * a
        grad *= 3 * GELU.K
        grad += 1
        grad *= a
        grad *= 2 * GELU.C  # a·2u′
        grad *= 1 - s
        grad += 1
        grad *= s
        grad *= g
        return narrow(grad, g.dtype)
