"""Fused neural-network ops: softmax, log-softmax, dropout, linear, layer norm, cross-entropies.

Each could be written from primitives. Fusing gives one graph node and a hand-derived backward,
which keeps the per-op overhead of the autograd small on the hot path.

With 16-bit inputs, the products are formed in fp32 and rounded once (``precision.product``),
and softmax, log-softmax, layer norm and the losses compute in fp32 inside, as mixed precision
prescribes (Micikevicius et al. 2018, §3.3: products accumulated and large reductions carried
out in fp32, softmax's among them; e^x overflows fp16 past x ≈ 11). They return the input's
dtype (the losses: fp32), and what backward reads is saved in 16 bits where that halves its
memory.
"""

from __future__ import annotations

import math

from ..backend import get_array_module
from .precision import WIDE, accumulated, is_low, narrow, product, total, wide
from .tensor import Function


def sum_over(a, axis: int, b=None):
    """Σ a (or Σ a ⊙ b) over ``axis``, kept as size 1; added in fp32 for 16-bit arrays and
    returned in ``a``'s dtype.

    For the last axis this is an einsum: NumPy sums short contiguous rows several times slower,
    and the einsum forms the product without a temporary array (it takes no bfloat16).
    """
    if is_low(a.dtype):
        return narrow(sum_over(wide(a), axis, None if b is None else wide(b)), a.dtype)
    if axis not in (-1, a.ndim - 1):
        return (a if b is None else a * b).sum(axis=axis, keepdims=True)
    xp = get_array_module(a)
    total = xp.einsum("...i->...", a) if b is None else xp.einsum("...i,...i->...", a, b)
    return total[..., None]


class Softmax(Function):
    """softmax(x) along ``axis``; in fp32 for a 16-bit x, its output rounded once to x's dtype
    and saved so for backward."""

    @staticmethod
    def forward(ctx, x, axis=-1):
        xp = get_array_module(x)
        xw = wide(x)
        out = xw - xw.max(axis=axis, keepdims=True)  # (..., V) shifted for stability
        xp.exp(out, out=out)
        out /= sum_over(out, axis)
        ctx.out = out = narrow(out, x.dtype)
        ctx.axis = axis
        return out

    @staticmethod
    def backward(ctx, g):
        y, gw = wide(ctx.out), wide(g)  # dx = y ⊙ (g − Σ g⊙y)
        dx = gw - sum_over(gw, ctx.axis, y)  # (..., V)
        dx *= y
        return narrow(dx, g.dtype)


class LogSoftmax(Function):
    """log softmax(x) along ``axis``; in fp32 for a 16-bit x, its output rounded once.

    Backward rebuilds the softmax as e^out, so ``out`` is saved in fp32 even for a 16-bit x:
    rounded to 16 bits, a log-probability of −10 is off by up to 10·u, and e^out by 10 u
    relative (4% in bf16)."""

    @staticmethod
    def forward(ctx, x, axis=-1):
        xp = get_array_module(x)
        xw = wide(x)
        shifted = xw - xw.max(axis=axis, keepdims=True)  # (..., V)
        ctx.out = out = shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))
        ctx.axis = axis
        return narrow(out, x.dtype)

    @staticmethod
    def backward(ctx, g):
        xp, gw = get_array_module(g), wide(g)  # dx = g − softmax · Σ g
        return narrow(gw - xp.exp(ctx.out) * gw.sum(axis=ctx.axis, keepdims=True), g.dtype)


class Dropout(Function):
    """Inverted dropout (Srivastava et al. 2014): keep with prob 1−p, scale kept by 1/(1−p).

    A 16-bit x is scaled in fp32 and rounded once: 1/(1−p) itself rounded to 16 bits would bias
    every kept entry the same way, and NumPy's float16 arithmetic is slower than the round trip.
    """

    @staticmethod
    def forward(ctx, x, keep_mask, p):
        xw = wide(x)
        ctx.keep, ctx.scale = keep_mask, xw.dtype.type(1.0 / (1.0 - p))  # a byte an entry kept
        out = xw * keep_mask
        out *= ctx.scale
        return narrow(out, x.dtype)

    @staticmethod
    def backward(ctx, g):
        grad = wide(g) * ctx.keep
        grad *= ctx.scale
        return narrow(grad, g.dtype), None


class Linear(Function):
    """Y[..., F] = X[..., D] · W[D, F] + b[F], the leading axes folded into one 2-D product
    (accumulated in fp32 for 16-bit operands on NumPy, the bias added before the rounding:
    ``precision.accumulated`` and ``precision.product``)."""

    @staticmethod
    def forward(ctx, x, w, b=None):
        rows = math.prod(x.shape[:-1])  # N, spelled out: a 0-wide axis leaves −1 ambiguous
        ctx.dtype = x.dtype  # x's gradient is returned in it
        if is_low(w.dtype) and x.dtype != w.dtype:  # wide data (a batch's features) meets
            x = x.astype(w.dtype)  # 16-bit weights: rounded, as a tensor core reads it
        ctx.x2, ctx.w, ctx.shape = x.reshape(rows, x.shape[-1]), w, x.shape  # (N, D)
        y = accumulated(ctx.x2, w)  # (N, F), in fp32 for 16-bit operands on NumPy
        if b is not None:
            y += b
        return narrow(y, x.dtype).reshape(*x.shape[:-1], w.shape[1])  # one rounding

    @staticmethod
    def backward(ctx, g):
        need_x, need_w = ctx.needs_input_grad[:2]
        g2 = g.reshape(ctx.x2.shape[0], g.shape[-1])  # (N, F)
        gx = product(g2, ctx.w.T).reshape(ctx.shape).astype(ctx.dtype, copy=False) \
            if need_x else None  # (..., D)
        gw = product(ctx.x2.T, g2) if need_w else None  # (D, F)
        need_b = len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2]
        gb = total(g2, axis=0) if need_b else None  # (F,)
        return gx, gw, gb


class LayerNorm(Function):
    """Normalize the last axis (Ba, Kiros & Hinton 2016, eq. 4), then scale γ and shift β; in
    fp32 for a 16-bit x (its mean and variance are sums), the output rounded once to x's dtype.
    γ and β share a dtype, which their gradients take."""

    @staticmethod
    def forward(ctx, x, gamma, beta, eps=1e-5):
        xp = get_array_module(x)
        d = x.shape[-1]
        xw = wide(x)
        xhat = xw - sum_over(xw, -1) / d  # (..., D) centred
        rstd = 1.0 / xp.sqrt(sum_over(xhat, -1, xhat) / d + eps)  # (..., 1)
        xhat *= rstd  # x̂
        # x̂ saved in x's dtype; rstd stays fp32: one number a row, and it scales every entry
        ctx.xhat, ctx.rstd, ctx.gamma = narrow(xhat, x.dtype), rstd, gamma
        out = xhat * gamma  # (..., D)
        out += beta
        return narrow(out, x.dtype)

    @staticmethod
    def backward(ctx, g):
        xp = get_array_module(g)
        need_x, need_gamma, need_beta = ctx.needs_input_grad
        xhat, rstd, gw, dtype = wide(ctx.xhat), ctx.rstd, wide(g), ctx.gamma.dtype
        d = g.shape[-1]
        ggamma = (narrow(xp.einsum("ni,ni->i", gw.reshape(-1, d), xhat.reshape(-1, d)), dtype)
                  if need_gamma else None)  # (D,): Σ g ⊙ x̂
        gbeta = narrow(gw.sum(axis=tuple(range(g.ndim - 1))), dtype) if need_beta else None
        if not need_x:
            return None, ggamma, gbeta
        # dx = rstd · (ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂)) with ĝ = g ⊙ γ, the layer-norm backward
        gx = gw * ctx.gamma  # (..., D): ĝ
        correction = xhat * (sum_over(gx, -1, xhat) / d)
        gx -= sum_over(gx, -1) / d
        gx -= correction
        gx *= rstd
        return narrow(gx, g.dtype), ggamma, gbeta


class CrossEntropy(Function):
    """Softmax cross-entropy of logits (N, V) against targets (N,), skipping ``ignore_index``.

    ``reduction="mean"`` divides by the number of counted targets (0 targets → loss 0),
    ``"sum"`` does not: data parallelism sums per rank and divides by the global count.

    16-bit logits: computed in fp32, the loss returned in fp32 (a 16-bit loss would round the
    reported value, and fp16 overflows under a loss scale of 2¹⁶ as backward's seed), the
    softmax saved and the logits' gradient returned in the logits' dtype.
    """

    @staticmethod
    def forward(ctx, logits, targets, ignore_index=-100, reduction="mean"):
        xp = get_array_module(logits)
        rows = xp.arange(logits.shape[0])
        valid = targets != ignore_index  # (N,)
        safe = xp.where(valid, targets, 0)
        lw = wide(logits)
        probs = lw - lw.max(axis=1, keepdims=True)  # (N, V), shifted for stability
        picked = probs[rows, safe]  # (N,)
        xp.exp(probs, out=probs)
        sumexp = sum_over(probs, -1)  # (N, 1)
        probs /= sumexp  # softmax
        losses = (xp.log(sumexp[:, 0]) - picked) * valid  # −log softmax(x)_y, masked
        ctx.probs, ctx.rows, ctx.safe, ctx.valid = narrow(probs, logits.dtype), rows, safe, valid
        return reduced(ctx, losses, valid, reduction, lw.dtype)

    @staticmethod
    def backward(ctx, g):
        probs = ctx.probs  # (N, V), in the logits' dtype
        grad = probs.astype(WIDE) if is_low(probs.dtype) else probs.copy()  # a copy, fp32 inside
        grad[ctx.rows, ctx.safe] -= 1  # softmax − onehot, for counted rows only
        grad *= (ctx.valid * (g * ctx.scale)).astype(grad.dtype)[:, None]
        return narrow(grad, probs.dtype), None


def reduced(ctx, losses, valid, reduction: str, dtype):
    """The rows' ``losses`` summed, over the ``valid`` count for ``"mean"`` (1 / max(count, 1),
    computed where the count is: no host sync), as a 0-d array of ``dtype``; the scale kept
    in ``ctx.scale`` for backward."""
    xp = get_array_module(losses)
    ctx.scale = 1.0
    if reduction == "mean":
        ctx.scale = (1.0 / xp.maximum(valid.sum(), 1)).astype(dtype)
    return xp.asarray(losses.sum() * ctx.scale, dtype=dtype)


class BinaryCrossEntropyWithLogits(Function):
    """−[y·log σ(z) + (1−y)·log σ(−z)] of logits z against targets y in [0, 1], same shape.

    Written as ``max(z, 0) − z·y + log(1 + e^−|z|)``, the two softplus terms folded into one
    that never overflows; its gradient is ``σ(z) − y``. ``reduction="mean"`` divides by the
    number of entries (none → loss 0), ``"sum"`` does not. 16-bit logits: as CrossEntropy.
    """

    @staticmethod
    def forward(ctx, logits, targets, reduction="mean"):
        xp = get_array_module(logits)
        z = wide(logits)  # (N,)
        y = targets.astype(z.dtype)  # (N,) int labels or soft targets
        losses = xp.maximum(z, 0) - z * y + xp.log1p(xp.exp(-xp.abs(z)))  # (N,)
        ctx.scale = 1.0 / max(logits.size, 1) if reduction == "mean" else 1.0
        residual = 0.5 * (xp.tanh(0.5 * z) + 1) - y  # (N,) σ(z) − y, σ stable
        ctx.residual = narrow(residual, logits.dtype)
        return xp.asarray(losses.sum() * ctx.scale, dtype=z.dtype)

    @staticmethod
    def backward(ctx, g):
        residual = wide(ctx.residual)
        grad = residual * (g * ctx.scale).astype(residual.dtype)  # (N,)
        return narrow(grad, ctx.residual.dtype), None


class Carry(Function):
    """y = x, and a scalar loss ℓ beside it: backward passes ∂L/∂y to x and gives ℓ the
    gradient 1, as if ℓ were added to the objective. A layer's own loss (a router's auxiliary
    losses) reaches backward through its output wherever the objective is computed, on another
    pipeline stage too (Megatron-LM's ``MoEAuxLossAutoScaler`` does the same)."""

    @staticmethod
    def forward(ctx, x, loss):
        ctx.loss = (get_array_module(loss), loss.shape, loss.dtype)
        return x

    @staticmethod
    def backward(ctx, g):
        xp, shape, dtype = ctx.loss
        return g, xp.ones(shape, dtype)
