"""Context-parallel attention by heads (Jacobs et al. 2023, DeepSpeed-Ulysses, §3.1): an
all-to-all turns the sequence-sharded q, k and v into head-sharded ones, each rank attends over
the whole sequence on H/cp heads, and an all-to-all turns the output back. Each rank sends
3/cp of its q, k, v and 1/cp of its output, (cp − 1)/cp of each over the wire, so its traffic
falls as cp grows; the heads bound cp (they must divide by it)."""

from __future__ import annotations

import numpy as np

from ...nn.attention import AttentionCore, attention_weights
from .. import duals
from .layout import Context, ContextError, future

HEADS, SEQUENCE = 1, 2  # the axes of (B, H, T, d)


class UlyssesAttention(AttentionCore):
    """q, k, v (B, H, T/cp, d) at this rank's positions → (B, H, T/cp, d): one device's causal
    attention for them, over ``context``'s cp group and layout; every key seen where not
    ``causal``."""

    def __init__(self, context: Context, causal: bool = True):
        super().__init__()
        self.context, self.causal, self._masks = context, causal, {}

    def forward(self, q, k, v):
        comm = self.context.comm
        heads, cp = q.shape[HEADS], comm.size
        if heads % cp:
            raise ContextError(f"Ulysses gives each of the {cp} cp ranks an equal share of the "
                               f"heads: {heads} heads do not divide by cp = {cp}")
        # (B, H/cp, T, d): this rank's heads over every position, in the ranks' order
        q, k, v = (duals.all_to_all(a, comm, HEADS, SEQUENCE) for a in (q, k, v))
        t = q.shape[SEQUENCE]
        if t not in self._masks and self.causal:  # the positions in the order they arrived
            order = np.concatenate(self.context.held(t))
            self._masks[t] = future(order, order, q.xp)  # (T, T)
        out = attention_weights(q, k, self._masks.get(t)) @ v  # (B, H/cp, T, T)·(B, H/cp, T, d)
        return duals.all_to_all(out, comm, SEQUENCE, HEADS)  # (B, H, T/cp, d)
