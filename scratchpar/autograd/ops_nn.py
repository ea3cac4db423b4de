"""Fused neural-network ops: softmax, log-softmax, dropout, linear, layer norm, cross-entropies.

Each could be written from primitives. Fusing gives one graph node and a hand-derived backward,
which keeps the per-op overhead of the autograd small on the hot path.
"""

from __future__ import annotations

import math

from ..backend import get_array_module
from .tensor import Function


def sum_over(a, axis: int, b=None):
    """Σ a (or Σ a ⊙ b) over ``axis``, kept as size 1.

    For the last axis this is an einsum: NumPy sums short contiguous rows several times slower,
    and the einsum forms the product without a temporary array.
    """
    if axis not in (-1, a.ndim - 1):
        return (a if b is None else a * b).sum(axis=axis, keepdims=True)
    xp = get_array_module(a)
    total = xp.einsum("...i->...", a) if b is None else xp.einsum("...i,...i->...", a, b)
    return total[..., None]


class Softmax(Function):
    @staticmethod
    def forward(ctx, x, axis=-1):
        xp = get_array_module(x)
        out = x - x.max(axis=axis, keepdims=True)  # shift for stability
        xp.exp(out, out=out)
        out /= sum_over(out, axis)
        ctx.out, ctx.axis = out, axis
        return out

    @staticmethod
    def backward(ctx, g):
        y = ctx.out  # dx = y ⊙ (g − Σ g⊙y)
        dx = g - sum_over(g, ctx.axis, y)
        dx *= y
        return dx


class LogSoftmax(Function):
    @staticmethod
    def forward(ctx, x, axis=-1):
        xp = get_array_module(x)
        shifted = x - x.max(axis=axis, keepdims=True)
        ctx.out = out = shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))
        ctx.axis = axis
        return out

    @staticmethod
    def backward(ctx, g):
        xp = get_array_module(g)  # dx = g − softmax · Σ g
        return g - xp.exp(ctx.out) * g.sum(axis=ctx.axis, keepdims=True)


class Dropout(Function):
    """Inverted dropout (Srivastava et al. 2014): keep with prob 1−p, scale kept by 1/(1−p)."""

    @staticmethod
    def forward(ctx, x, keep_mask, p):
        ctx.keep, ctx.scale = keep_mask, x.dtype.type(1.0 / (1.0 - p))  # a byte an entry kept
        out = x * keep_mask
        out *= ctx.scale
        return out

    @staticmethod
    def backward(ctx, g):
        grad = g * ctx.keep
        grad *= ctx.scale
        return grad, None


class Linear(Function):
    """Y[..., F] = X[..., D] · W[D, F] + b[F], the leading axes folded into one 2-D product."""

    @staticmethod
    def forward(ctx, x, w, b=None):
        rows = math.prod(x.shape[:-1])  # N, spelled out: a 0-wide axis leaves −1 ambiguous
        ctx.x2, ctx.w, ctx.shape = x.reshape(rows, x.shape[-1]), w, x.shape  # (N, D)
        y = ctx.x2 @ w  # (N, F)
        if b is not None:
            y += b
        return y.reshape(*x.shape[:-1], w.shape[1])

    @staticmethod
    def backward(ctx, g):
        need_x, need_w = ctx.needs_input_grad[:2]
        g2 = g.reshape(ctx.x2.shape[0], g.shape[-1])  # (N, F)
        gx = (g2 @ ctx.w.T).reshape(ctx.shape) if need_x else None  # (..., D)
        gw = (ctx.x2.T @ g2) if need_w else None  # (D, F)
        gb = g2.sum(axis=0) if len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2] else None
        return gx, gw, gb


class LayerNorm(Function):
    """Normalize the last axis (Ba, Kiros & Hinton 2016, eq. 4), then scale γ and shift β."""

    @staticmethod
    def forward(ctx, x, gamma, beta, eps=1e-5):
        xp = get_array_module(x)
        d = x.shape[-1]
        xhat = x - sum_over(x, -1) / d  # (..., D) centred
        rstd = 1.0 / xp.sqrt(sum_over(xhat, -1, xhat) / d + eps)  # (..., 1)
        xhat *= rstd  # x̂
        ctx.xhat, ctx.rstd, ctx.gamma = xhat, rstd, gamma
        out = xhat * gamma
        out += beta
        return out

    @staticmethod
    def backward(ctx, g):
        xp = get_array_module(g)
        need_x, need_gamma, need_beta = ctx.needs_input_grad
        xhat, rstd = ctx.xhat, ctx.rstd
        d = g.shape[-1]
        ggamma = (xp.einsum("ni,ni->i", g.reshape(-1, d), xhat.reshape(-1, d))  # (D,): Σ g ⊙ x̂
                  if need_gamma else None)
        gbeta = g.sum(axis=tuple(range(g.ndim - 1))) if need_beta else None  # (D,)
        if not need_x:
            return None, ggamma, gbeta
        # dx = rstd · (ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂)) with ĝ = g ⊙ γ, the layer-norm backward
        gx = g * ctx.gamma  # (..., D): ĝ
        correction = xhat * (sum_over(gx, -1, xhat) / d)
        gx -= sum_over(gx, -1) / d
        gx -= correction
        gx *= rstd
        return gx, ggamma, gbeta


class CrossEntropy(Function):
    """Softmax cross-entropy of logits (N, V) against targets (N,), skipping ``ignore_index``.

    ``reduction="mean"`` divides by the number of counted targets (0 targets → loss 0),
    ``"sum"`` does not: data parallelism sums per rank and divides by the global count.
    """

    @staticmethod
    def forward(ctx, logits, targets, ignore_index=-100, reduction="mean"):
        xp = get_array_module(logits)
        rows = xp.arange(logits.shape[0])
        valid = targets != ignore_index  # (N,)
        safe = xp.where(valid, targets, 0)
        probs = logits - logits.max(axis=1, keepdims=True)  # (N, V), shifted for stability
        picked = probs[rows, safe]  # (N,)
        xp.exp(probs, out=probs)
        sumexp = sum_over(probs, -1)  # (N, 1)
        probs /= sumexp  # softmax
        losses = (xp.log(sumexp[:, 0]) - picked) * valid  # −log softmax(x)_y, masked
        ctx.scale = 1.0
        if reduction == "mean":  # 1 / max(count, 1), computed where the count is: no host sync
            ctx.scale = (1.0 / xp.maximum(valid.sum(), 1)).astype(logits.dtype)
        ctx.probs, ctx.rows, ctx.safe, ctx.valid = probs, rows, safe, valid
        return xp.asarray(losses.sum() * ctx.scale, dtype=logits.dtype)

    @staticmethod
    def backward(ctx, g):
        grad = ctx.probs.copy()  # (N, V): softmax − onehot, for counted rows only
        grad[ctx.rows, ctx.safe] -= 1
        grad *= (ctx.valid * (g * ctx.scale)).astype(grad.dtype)[:, None]
        return grad, None


class BinaryCrossEntropyWithLogits(Function):
    """−[y·log σ(z) + (1−y)·log σ(−z)] of logits z against targets y in [0, 1], same shape.

    Written as ``max(z, 0) − z·y + log(1 + e^−|z|)``, the two softplus terms folded into one
    that never overflows; its gradient is ``σ(z) − y``. ``reduction="mean"`` divides by the
    number of entries (none → loss 0), ``"sum"`` does not.
    """

    @staticmethod
    def forward(ctx, logits, targets, reduction="mean"):
        xp = get_array_module(logits)
        y = targets.astype(logits.dtype)  # (N,) int labels or soft targets
        losses = xp.maximum(logits, 0) - logits * y + xp.log1p(xp.exp(-xp.abs(logits)))  # (N,)
        ctx.scale = 1.0 / max(logits.size, 1) if reduction == "mean" else 1.0
        ctx.residual = 0.5 * (xp.tanh(0.5 * logits) + 1) - y  # (N,) σ(z) − y, σ stable
        return xp.asarray(losses.sum() * ctx.scale, dtype=logits.dtype)

    @staticmethod
    def backward(ctx, g):
        return ctx.residual * (g * ctx.scale).astype(ctx.residual.dtype), None
