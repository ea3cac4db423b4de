"""Fused neural-network ops: softmax, log-softmax, dropout, linear, layer norm, cross-entropy.

Each could be written from primitives; fusing gives one graph node and a hand-derived backward,
which keeps the per-op overhead of the autograd small on the hot path.
"""

from __future__ import annotations

from ..backend import get_array_module
from .tensor import Function


class Softmax(Function):
    @staticmethod
    def forward(ctx, x, axis=-1):
        xp = get_array_module(x)
        e = xp.exp(x - x.max(axis=axis, keepdims=True))  # shift for stability
        ctx.out = out = e / e.sum(axis=axis, keepdims=True)
        ctx.axis = axis
        return out

    @staticmethod
    def backward(ctx, g):
        y = ctx.out  # dx = y ⊙ (g − Σ g⊙y)
        return y * (g - (g * y).sum(axis=ctx.axis, keepdims=True))


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
        ctx.scale = keep_mask * x.dtype.type(1.0 / (1.0 - p))  # (...) same shape as x
        return x * ctx.scale

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale, None


class Linear(Function):
    """Y[..., F] = X[..., D] · W[D, F] + b[F]."""

    @staticmethod
    def forward(ctx, x, w, b=None):
        ctx.x, ctx.w = x, w
        y = x @ w  # (..., F)
        if b is not None:
            y += b
        return y

    @staticmethod
    def backward(ctx, g):
        need_x, need_w = ctx.needs_input_grad[:2]
        x, w = ctx.x, ctx.w
        g2 = g.reshape(-1, g.shape[-1])  # (N, F)
        gx = (g @ w.T) if need_x else None  # (..., D)
        gw = (x.reshape(-1, x.shape[-1]).T @ g2) if need_w else None  # (D, F)
        gb = g2.sum(axis=0) if len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2] else None
        return gx, gw, gb


class LayerNorm(Function):
    """Normalize the last axis (Ba, Kiros & Hinton 2016, eq. 4), then scale γ and shift β."""

    @staticmethod
    def forward(ctx, x, gamma, beta, eps=1e-5):
        xp = get_array_module(x)
        mu = x.mean(axis=-1, keepdims=True)  # (..., 1)
        xc = x - mu
        rstd = 1.0 / xp.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)  # (..., 1)
        ctx.xhat = xhat = xc * rstd  # (..., D)
        ctx.rstd, ctx.gamma = rstd, gamma
        return xhat * gamma + beta

    @staticmethod
    def backward(ctx, g):
        xhat, rstd = ctx.xhat, ctx.rstd
        lead = tuple(range(g.ndim - 1))
        ggamma = (g * xhat).sum(axis=lead)  # (D,)
        gbeta = g.sum(axis=lead)  # (D,)
        gx_hat = g * ctx.gamma  # (..., D)
        # dx = rstd · (ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂)), the standard layer-norm backward
        gx = rstd * (gx_hat - gx_hat.mean(axis=-1, keepdims=True)
                     - xhat * (gx_hat * xhat).mean(axis=-1, keepdims=True))
        return gx, ggamma, gbeta


class CrossEntropy(Function):
    """Softmax cross-entropy of logits (N, V) against targets (N,), skipping ``ignore_index``.

    ``reduction="mean"`` divides by the number of counted targets (0 targets → loss 0),
    ``"sum"`` does not: data parallelism sums per rank and divides by the global count.
    """

    @staticmethod
    def forward(ctx, logits, targets, ignore_index=-100, reduction="mean"):
        xp = get_array_module(logits)
        n = logits.shape[0]
        shifted = logits - logits.max(axis=1, keepdims=True)  # (N, V)
        exp = xp.exp(shifted)
        sumexp = exp.sum(axis=1, keepdims=True)  # (N, 1)
        valid = targets != ignore_index  # (N,)
        safe = xp.where(valid, targets, 0)
        picked = shifted[xp.arange(n), safe]  # (N,)
        losses = (xp.log(sumexp[:, 0]) - picked) * valid  # −log softmax(x)_y, masked
        count = int(valid.sum())
        ctx.scale = 1.0 / max(count, 1) if reduction == "mean" else 1.0
        ctx.probs, ctx.safe, ctx.valid = exp / sumexp, safe, valid
        return xp.asarray(losses.sum() * ctx.scale, dtype=logits.dtype)

    @staticmethod
    def backward(ctx, g):
        xp = get_array_module(g)
        grad = ctx.probs.copy()  # (N, V): softmax − onehot, for counted rows only
        grad[xp.arange(grad.shape[0]), ctx.safe] -= 1
        grad *= (ctx.valid * (g * ctx.scale)).astype(grad.dtype)[:, None]
        return grad, None
