"""Context-parallel attention by all-gather (Dubey et al. 2024, Llama 3, §3.3.2): every rank
gathers the whole sequence's keys and values, attends with its own queries, and in backward
reduce-scatters their gradients back to the ranks that hold them. Simpler than the ring, it
takes any mask, and its communication is exposed rather than overlapped."""

from __future__ import annotations

import numpy as np

from ...nn.attention import AttentionCore, attend
from .. import duals
from .layout import Context, future


class AllGatherAttention(AttentionCore):
    """q (B, H, T/cp, d), k and v (B, G, T/cp, d) at this rank's positions → (B, H, T/cp, d):
    one device's causal attention (``nn.attention.AttentionCore``) for those queries, over
    ``context``'s cp group and layout; every key seen where not ``causal``. It gathers the G
    key/value heads, which grouped-query attention makes fewer than H (Llama 3 gathers 8 of
    128)."""

    def __init__(self, context: Context, causal: bool = True):
        super().__init__()
        self.context, self.causal, self._masks = context, causal, {}

    def forward(self, q, k, v):
        comm = self.context.comm
        t = k.shape[2] * comm.size  # every rank holds T/cp positions: nothing to exchange first
        rows = [len(mine) for mine in self.context.held(t)]
        keys = duals.all_gather(k, comm, axis=2, rows=rows)  # (B, G, T, d): rank order
        values = duals.all_gather(v, comm, axis=2, rows=rows)
        if t not in self._masks and self.causal:  # the keys' positions, in gathered order
            held = self.context.held(t)
            self._masks[t] = future(held[comm.rank], np.concatenate(held), q.xp)
        return attend(q, keys, values, self._masks.get(t))  # (B, H, T/cp, T)·(B, G, T, d)
