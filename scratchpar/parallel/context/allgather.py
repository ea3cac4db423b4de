"""Context-parallel attention by all-gather (Dubey et al. 2024, Llama 3, §3.3.2): every rank
gathers the whole sequence's keys and values, attends with its own queries, and in backward
reduce-scatters their gradients back to the ranks that hold them. Simpler than the ring, it
takes any mask, and its communication is exposed rather than overlapped."""

from __future__ import annotations

import numpy as np

from ...nn.attention import attention_weights
from ...nn.module import Module
from .. import duals
from .layout import future


class AllGatherAttention(Module):
    """q, k, v (B, H, T/cp, d) at this rank's ``mine`` positions → (B, H, T/cp, d): one device's
    causal attention (``nn.attention.AttentionCore``) for those queries. ``held[i]`` are the
    positions rank i of ``comm`` holds (:func:`~.layout.positions`)."""

    def __init__(self, comm, held: list):
        self.comm, self.held = comm, held
        self.mine = held[comm.rank]
        self._mask = None

    def forward(self, q, k, v):
        keys = duals.all_gather(k, self.comm, axis=2)  # (B, H, T, d): every rank's, rank order
        values = duals.all_gather(v, self.comm, axis=2)
        if self._mask is None:  # the keys' positions, in the order they were gathered
            self._mask = future(self.mine, np.concatenate(self.held), q.xp)
        return attention_weights(q, keys, self._mask) @ values  # (B, H, T/cp, T)·(B, H, T, d)
