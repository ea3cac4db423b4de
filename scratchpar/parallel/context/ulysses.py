"""Context-parallel attention by heads (Jacobs et al. 2023, DeepSpeed-Ulysses, §3.1): an
all-to-all turns the sequence-sharded q, k and v into head-sharded ones, each rank attends over
the whole sequence on H/cp heads, and an all-to-all turns the output back. Each rank sends
3/cp of its q, k, v and 1/cp of its output, (cp − 1)/cp of each over the wire, so its traffic
falls as cp grows; the key/value heads bound cp (they must divide by it)."""

from __future__ import annotations

import numpy as np

from ...nn.attention import AttentionCore, attend
from .. import duals
from .layout import Context, ContextError, future

HEADS, SEQUENCE = 1, 2  # the axes of (B, G, T, d)


class UlyssesAttention(AttentionCore):
    """q (B, H, T/cp, d), k and v (B, G, T/cp, d) at this rank's positions → (B, H, T/cp, d):
    one device's causal attention for them, over ``context``'s cp group and layout; every key
    seen where not ``causal``. A rank takes G/cp key/value heads and their query heads: query
    head j·G + g goes with group g (``nn.attention``), so q moves as (B, r, G, T/cp, d)."""

    def __init__(self, context: Context, causal: bool = True):
        super().__init__()
        self.context, self.causal, self._masks = context, causal, {}

    def forward(self, q, k, v):
        comm = self.context.comm
        (b, heads, rows, d), groups, cp = q.shape, k.shape[HEADS], comm.size
        if groups % cp:
            raise ContextError(f"Ulysses gives each of the {cp} cp ranks an equal share of the "
                               f"key/value heads: {groups} do not divide by cp = {cp}")
        r = heads // groups  # query heads a group
        q = duals.all_to_all(q.reshape(b, r, groups, rows, d), comm, HEADS + 1, SEQUENCE + 1)
        k, v = (duals.all_to_all(a, comm, HEADS, SEQUENCE) for a in (k, v))  # (B, G/cp, T, d)
        t = k.shape[SEQUENCE]
        if t not in self._masks and self.causal:  # the positions in the order they arrived
            order = np.concatenate(self.context.held(t))
            self._masks[t] = future(order, order, q.xp)  # (T, T)
        q = q.reshape(b, heads // cp, t, d)  # (B, r·G/cp, T, d): this rank's groups' heads
        out = attend(q, k, v, self._masks.get(t))  # (B, H/cp, T, T)·(B, G/cp, T, d)
        out = duals.all_to_all(out.reshape(b, r, groups // cp, t, d), comm, SEQUENCE + 1,
                               HEADS + 1)  # (B, r, G, T/cp, d)
        return out.reshape(b, heads, rows, d)
