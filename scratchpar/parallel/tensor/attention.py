"""Causal self-attention split by heads across a tp group (Shoeybi et al. 2019, §3, Fig. 3b)."""

from __future__ import annotations

from ...comm.chunks import counts
from ...nn.attention import AttentionCore
from ...nn.module import Module
from .dropout import HeadDropout
from .layout import Split
from .linear import (
    ColumnParallelLinear,
    RowParallelLinear,
    SequenceParallelColumnLinear,
    SequenceParallelRowLinear,
)


class HeadParallelQKV(ColumnParallelLinear):
    """X[B,T,C] · W[C,3·H/t·d] + b[3·H/t·d] → [q | k | v] of this rank's heads, (B, T, 3·h_r·d).

    The fused weight's columns are [q heads | k heads | v heads]. Rank r takes its heads
    ``chunks.bounds(H, t)[r]`` of each of the three."""

    def __init__(self, linear, comm, heads: int):
        c = linear.weight.shape[0]
        self.tp_layouts = {"weight": Split(axis=2, view=(c, 3, heads, c // heads)),
                           "bias": Split(axis=1, view=(3, heads, c // heads))}
        super().__init__(linear, comm)


class HeadParallelProj(RowParallelLinear):
    """X[B,T,H/t·d] · W[H/t·d,C] → Σ_r → Y[B,T,C], + b[C]: the rows of this rank's heads."""

    def __init__(self, linear, comm, heads: int):
        c = linear.weight.shape[1]
        self.tp_layouts = {**self.tp_layouts, "weight": Split(axis=0, view=(heads, c // heads, c))}
        super().__init__(linear, comm)


class SequenceParallelQKV(SequenceParallelColumnLinear, HeadParallelQKV):
    """X[B,T/t,C] → all-gather along T → HeadParallelQKV (Korthikanti et al. 2022, §4.2.2)."""


class SequenceParallelProj(SequenceParallelRowLinear, HeadParallelProj):
    """HeadParallelProj with a reduce-scatter along T in place of Σ_r: Y[B,T/t,C], + b[C] on
    this rank's tokens (b ``PARTIAL``; Korthikanti et al. 2022, §4.2.2)."""


class ParallelAttention(Module):
    """X[B,T,C] → Y[B,T,C], both replicated; rank r computes heads ``chunks.bounds(H, t)[r]``.

    Megatron §3, Fig. 3b: the heads are independent, so the fused QKV weight splits by heads
    (column-parallel), each rank attends with its own heads, and the output projection splits
    by the same heads' rows (row-parallel): one f before QKV, one g after the projection, so
    one all-reduce forward and one backward. A rank may hold no head; it still takes part.
    Its attention core is one device's, over h_r heads, with the probabilities (B, h_r, T, T)
    dropped out as the whole (B, H, T, T) would be (``HeadDropout``)."""

    qkv_class, proj_class = HeadParallelQKV, HeadParallelProj

    def __init__(self, attn, comm):
        heads = self.n_heads = attn.n_heads  # H, the whole layer's
        self.head_dim = attn.qkv.weight.shape[0] // heads  # d
        self.heads = counts(heads, comm.size)[comm.rank]  # h_r, this rank's heads
        self.qkv = self.qkv_class(attn.qkv, comm, heads)
        self.proj = self.proj_class(attn.proj, comm, heads)
        self.core = AttentionCore(HeadDropout(attn.core.dropout.p, comm, heads))

    def forward(self, x):
        qkv = self.qkv(x)  # (B, T, 3·h_r·d); f (or the all-gather along T) inside
        (b, t), h, d = qkv.shape[:2], self.heads, self.head_dim
        qkv = qkv.reshape(b, t, 3, h, d).permute(2, 0, 3, 1, 4)  # (3, B, h_r, T, d)
        y = self.core(qkv[0], qkv[1], qkv[2])  # (B, h_r, T, d): Vaswani eq. 1, h_r heads
        return self.proj(y.permute(0, 2, 1, 3).reshape(b, t, h * d))  # (B, T, C); g inside


class SequenceParallelAttention(ParallelAttention):
    """X[B,T/t,C] → Y[B,T/t,C], sequence shards (``chunks.bounds(T, t)``): the all-gather along
    T before QKV replaces f, the reduce-scatter after the projection replaces g (Korthikanti
    et al. 2022, §4.2.2). Between them run ParallelAttention's heads over the whole sequence."""

    qkv_class, proj_class = SequenceParallelQKV, SequenceParallelProj
