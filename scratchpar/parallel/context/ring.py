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
from .layout import future

KV, GRADS = 1, 2  # the tags of a block's keys and values, and of their gradients


class RingAttention(Function):
    """q, k, v (B, H, T/cp, d) at this rank's positions → (B, H, T/cp, d), one device's causal
    attention for them. ``comm``: the cp group (a dup of its own: the ring names its tags);
    ``held[i]``: the positions rank i holds (:func:`~.layout.positions`)."""

    @staticmethod
    def forward(ctx, q, k, v, comm, held):
        xp, wide = get_array_module(q), np.promote_types(q.dtype, np.float32)
        scale = 1.0 / math.sqrt(q.shape[-1])
        out = xp.zeros(q.shape, wide)  # (B, H, Tq, d)
        lse = xp.full(q.shape[:-1], -np.inf, wide)  # (B, H, Tq)
        for block, source in _ring(comm, xp.stack([k, v])):
            part = _scores(q, block[0], held[comm.rank], held[source], scale, xp)
            if part is None:
                continue
            high = _finite(part.max(-1, keepdims=True), xp)  # (B, H, Tq, 1)
            weights = xp.exp(part - high)  # (B, H, Tq, Tk): this block's, unnormalized
            total = weights.sum(-1)  # (B, H, Tq)
            seen = total > 0  # rows with a key visible in this block
            total = xp.where(seen, total, 1.0)
            mine = (weights @ block[1].astype(wide)) / total[..., None]  # (B, H, Tq, d)
            mine_lse = xp.where(seen, high[..., 0] + xp.log(total), -np.inf)
            merged = xp.logaddexp(lse, mine_lse)  # = lse − log σ(lse − lse_b)
            out = (out * _exp(lse - merged, xp)[..., None]
                   + mine * _exp(mine_lse - merged, xp)[..., None])
            lse = merged
        ctx.comm, ctx.held, ctx.saved = comm, held, (q, k, v, out, lse)
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
            part = _scores(q, block[0], held[comm.rank], held[source], scale, xp)
            if part is not None:
                probs = _exp(part - lse[..., None], xp)  # (B, H, Tq, Tk), hidden: 0
                grads[1] += probs.swapaxes(-1, -2) @ grad  # dV += Pᵀ·dO
                dscores = probs * (grad @ block[1].astype(wide).swapaxes(-1, -2)
                                   - rowdot[..., None])  # dS = P ∘ (dO·Vᵀ − D)
                dq += (dscores @ block[0].astype(wide)) * scale
                grads[0] += (dscores.swapaxes(-1, -2) @ q.astype(wide)) * scale
            grads = ring.hand_on(grads)  # to the next rank, which holds this block next
        return dq.astype(q.dtype), grads[0].astype(k.dtype), grads[1].astype(v.dtype)


class _ring:
    """The blocks a rank holds in turn, ``(block, its owner)``, its own first: each step
    posts the block to the next rank and the previous rank's to be received, and hands it
    over when asked for the next. :meth:`hand_on` passes a block's gradients one step on:
    after the last step they are back with their owner."""

    def __init__(self, comm, block):
        self.comm, self.block = comm, block
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


def _scores(q, keys, mine, theirs, scale, xp):
    """QKᵀ/√d (B, H, Tq, Tk) in fp32 or wider, the future hidden (−∞); ``None`` where every
    key is after every query (a block a causal rank skips)."""
    hidden = future(mine, theirs, xp)  # (Tq, Tk)
    if bool(hidden.all()):
        return None
    wide = np.promote_types(q.dtype, np.float32)
    scores = (q.astype(wide) @ keys.astype(wide).swapaxes(-1, -2)) * scale
    return xp.where(hidden, -np.inf, scores)


def _finite(x, xp):
    """``x`` with −∞ (a row whose keys are all hidden) as 0, so that exp(s − max) stays 0."""
    return xp.where(xp.isfinite(x), x, 0.0)


def _exp(x, xp):
    """e^x, with e^(−∞ − (−∞)) (a row no block has reached) as 0 rather than NaN."""
    return xp.exp(xp.where(xp.isnan(x), -np.inf, x))
