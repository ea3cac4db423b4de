"""Ring attention (Liu et al. 2023, "Ring Attention with Blockwise Transformers", §3): the
keys and values of a cp group travel around its ring, one rank's block a step, while each rank
attends its own queries to the block in hand; the next block's message is in flight meanwhile.

Each block gives its part of the output normalized by its own softmax, and the log-sum-exp of
its scores, lse_b. Blocks merge by their log-sum-exps (the online softmax of Milakov &
Gimelshein 2018, which FlashAttention computes blockwise, Dao et al. 2022, §3.1):

    lse ← lse − log σ(lse − lse_b),   o ← o·e^(lse_old − lse) + o_b·e^(lse_b − lse)

in fp32 or wider, so the result is one device's softmax(QKᵀ/√d)·V. Backward recomputes each
block's probabilities from the final lse (FlashAttention's backward, Dao et al. 2022, App. B.2)
and runs a second ring, in which each block's dK and dV travel with it and reach their owner
after the last step.
"""

from __future__ import annotations

import math

import numpy as np

from ...autograd import Function
from ...backend import get_array_module
from ...nn.attention import AttentionCore
from .layout import Context, future

KV, GRADS = 1, 2  # the tags of a block's keys and values, and of their gradients


class RingAttention(AttentionCore):
    """q (B, H, T/cp, d), k and v (B, G, T/cp, d) at this rank's positions → (B, H, T/cp, d):
    one device's causal attention for them, over ``context``'s cp group and layout (its
    communicator one of the group's own: the ring names its tags); every key seen where not
    ``causal``. The ring carries the G key/value heads; query head j·G + g meets group g's
    (``nn.attention``), as q (B, r, G, T/cp, d) against k, v (B, 1, G, T/cp, d)."""

    def __init__(self, context: Context, causal: bool = True):
        super().__init__()
        self.context, self.causal = context, causal

    def forward(self, q, k, v):
        (b, heads, rows, d), groups = q.shape, k.shape[1]
        held = self.context.held(rows * self.context.comm.size)
        if groups != heads:
            q = q.reshape(b, heads // groups, groups, rows, d)
            k, v = (a.reshape(b, 1, groups, rows, d) for a in (k, v))
        out = Ring.apply(q, k, v, comm=self.context.comm, held=held, causal=self.causal)
        return out.reshape(b, heads, rows, d)


class Ring(Function):
    """The ring's forward and backward (see above): ``held[i]`` the positions rank i of
    ``comm`` holds (:func:`~.layout.positions`)."""

    @staticmethod
    def forward(ctx, q, k, v, comm, held, causal=True):
        xp, wide = get_array_module(q), np.promote_types(q.dtype, np.float32)
        scale = 1.0 / math.sqrt(q.shape[-1])
        out = xp.zeros(q.shape, wide)  # (B, H, Tq, d)
        lse = xp.full(q.shape[:-1], -np.inf, wide)  # (B, H, Tq)
        for block, source in _ring(comm, xp.stack([k, v])):
            seen = visible(held[comm.rank], held[source], causal)
            if seen is None:  # every key after every query: a block a causal rank skips
                continue
            rows, cols, hidden = seen
            part = _scores(q[..., rows, :], block[0][..., cols, :], hidden, scale, xp)
            high = _finite(part.max(-1, keepdims=True), xp)  # (B, H, tq, 1)
            weights = xp.exp(part - high)  # (B, H, tq, tk): this block's, unnormalized
            total = weights.sum(-1)  # (B, H, tq)
            seeing = total > 0  # rows with a key visible in this block
            total = xp.where(seeing, total, 1.0)
            mine = (weights @ block[1][..., cols, :].astype(wide)) / total[..., None]
            mine_lse = xp.where(seeing, high[..., 0] + xp.log(total), -np.inf)
            merged = xp.logaddexp(lse[..., rows], mine_lse)  # = lse − log σ(lse − lse_b)
            out[..., rows, :] = (out[..., rows, :] * _exp(lse[..., rows] - merged, xp)[..., None]
                                 + mine * _exp(mine_lse - merged, xp)[..., None])
            lse[..., rows] = merged
        ctx.comm, ctx.held, ctx.causal, ctx.saved = comm, held, causal, (q, k, v, out, lse)
        return out.astype(q.dtype)

    @staticmethod
    def backward(ctx, grad):
        q, k, v, out, lse = ctx.saved
        comm, held = ctx.comm, ctx.held
        xp, wide = get_array_module(q), out.dtype
        scale = 1.0 / math.sqrt(q.shape[-1])
        grad = grad.astype(wide)
        rowdot = (grad * out).sum(-1)  # (B, H, Tq): D = rowsum(dO ∘ O)
        dq = xp.zeros(q.shape, wide)
        grads = xp.zeros((2, *k.shape), wide)  # the block in hand's dK, dV, as they travel
        ring = _ring(comm, xp.stack([k, v]))
        for block, source in ring:
            seen = visible(held[comm.rank], held[source], ctx.causal)
            if seen is not None:
                rows, cols, hidden = seen
                keys, values = (x[..., cols, :].astype(wide) for x in block)
                part = _scores(q[..., rows, :], keys, hidden, scale, xp)
                probs = _exp(part - lse[..., rows, None], xp)  # (B, H, tq, tk), hidden: 0
                mine = grad[..., rows, :]  # dO of these rows
                grads[1][..., cols, :] += _group(probs.swapaxes(-1, -2) @ mine)  # dV += Pᵀ·dO
                dscores = probs * (mine @ values.swapaxes(-1, -2)
                                   - rowdot[..., rows, None])  # dS = P ∘ (dO·Vᵀ − D)
                dq[..., rows, :] += (dscores @ keys) * scale
                grads[0][..., cols, :] += _group(dscores.swapaxes(-1, -2)
                                                 @ q[..., rows, :].astype(wide)) * scale
            grads = ring.hand_on(grads)  # to the next rank, which holds this block next
        return dq.astype(q.dtype), grads[0].astype(k.dtype), grads[1].astype(v.dtype)


class _ring:
    """The blocks a rank holds in turn, ``(block, its owner)``, its own first: each step
    posts the block to the next rank and the previous rank's to be received, and hands it
    over when asked for the next. :meth:`hand_on` passes a block's gradients one step on:
    after the last step they are back with their owner."""

    def __init__(self, comm, block):
        self.comm, self.block = comm, get_array_module(block).ascontiguousarray(block)
        self.next, self.prev = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size

    def __iter__(self):
        block = self.block
        for step in range(self.comm.size):
            incoming = None
            if step < self.comm.size - 1:  # the next block in flight behind this one's compute
                incoming = get_array_module(block).empty_like(block)
                requests = [self.comm.isend(block, self.next, KV),
                            self.comm.irecv(incoming, self.prev, KV)]
            yield block, (self.comm.rank - step) % self.comm.size
            if incoming is not None:
                self.comm.wait_all(requests)
                block = incoming

    def hand_on(self, grads):
        if self.comm.size == 1:
            return grads
        received = get_array_module(grads).empty_like(grads)
        self.comm.sendrecv(grads, self.next, received, self.prev, GRADS)
        return received


def visible(mine, theirs, causal: bool):
    """Which part of the (Tq, Tk) block of queries at ``mine`` and keys at ``theirs`` to
    compute: the slices of rows and of columns bounding every visible pair, and the future
    hidden within them (``None`` where none is); ``None`` where nothing is visible. Under the
    zig-zag layout a block from a lower rank is seen whole by this rank's queries in its early
    chunk's keys alone, and one from a higher rank by its late chunk's queries alone: half a
    block's products, and no mask (Brandon et al. 2023, §3; Megatron-LM's ring does the
    same)."""
    if not causal:
        return slice(None), slice(None), None
    hidden = future(mine, theirs)  # (Tq, Tk), on the host
    rows, cols = np.flatnonzero(~hidden.all(1)), np.flatnonzero(~hidden.all(0))
    if rows.size == 0:
        return None
    rows, cols = slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1)
    inner = hidden[rows, cols]
    return rows, cols, inner if inner.any() else None


def _scores(q, keys, hidden, scale, xp):
    """QKᵀ/√d (B, H, tq, tk) in fp32 or wider, the ``hidden`` (tq, tk) entries −∞."""
    wide = np.promote_types(q.dtype, np.float32)
    scores = (q.astype(wide) @ keys.astype(wide).swapaxes(-1, -2)) * scale
    return scores if hidden is None else xp.where(xp.asarray(hidden), -np.inf, scores)


def _group(x):
    """A block's dK or dV summed over each group's query heads, axis 1 of (B, r, G, tk, d),
    where grouped-query attention shares one key/value head among r."""
    return x if x.ndim == 4 else x.sum(axis=1, keepdims=True)


def _finite(x, xp):
    """``x`` with −∞ (a row whose keys are all hidden) as 0, so that exp(s − max) stays 0."""
    return xp.where(xp.isfinite(x), x, 0.0)


def _exp(x, xp):
    """e^x, with e^(−∞ − (−∞)) (a row no block has reached) as 0 rather than NaN."""
    return xp.exp(xp.where(xp.isnan(x), -np.inf, x))
