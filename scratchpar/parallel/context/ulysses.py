"""Context-parallel attention by heads (Jacobs et al. 2023, DeepSpeed-Ulysses, §3.1): an
all-to-all turns the sequence-sharded q, k and v into head-sharded ones, each rank attends over
the whole sequence on H/cp heads, and an all-to-all turns the output back. Each rank sends
3/cp of its q, k, v and 1/cp of its output, (cp − 1)/cp of each over the wire, so its traffic
falls as cp grows; the heads bound cp (they must divide by it)."""

from __future__ import annotations

import numpy as np

from ...nn.attention import attention_weights
from ...nn.module import Module
from .. import duals
from .layout import ContextError, future

HEADS, SEQUENCE = 1, 2  # the axes of (B, H, T, d)


class UlyssesAttention(Module):
    """q, k, v (B, H, T/cp, d) at this rank's positions → (B, H, T/cp, d): one device's causal
    attention for them. ``held[i]`` are the positions rank i of ``comm`` holds."""

    def __init__(self, comm, held: list):
        self.comm, self.held = comm, held
        self._mask = None

    def forward(self, q, k, v):
        heads, cp = q.shape[HEADS], self.comm.size
        if heads % cp:
            raise ContextError(f"Ulysses gives each of the {cp} cp ranks an equal share of the "
                               f"heads: {heads} heads do not divide by cp = {cp}")
        # (B, H/cp, T, d): this rank's heads over every position, in the ranks' order
        q, k, v = (duals.all_to_all(a, self.comm, HEADS, SEQUENCE) for a in (q, k, v))
        if self._mask is None:
            order = np.concatenate(self.held)
            self._mask = future(order, order, q.xp)  # (T, T)
        out = attention_weights(q, k, self._mask) @ v  # (B, H/cp, T, T)·(B, H/cp, T, d)
        return duals.all_to_all(out, self.comm, SEQUENCE, HEADS)  # (B, H, T/cp, d)
