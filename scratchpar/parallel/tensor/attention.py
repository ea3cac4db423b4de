"""Causal self-attention split by heads across a tp group (Shoeybi et al. 2019, §3, Fig. 3b)."""

from __future__ import annotations

from ...nn.attention import AttentionCore, split_qkv
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
    """X[B,T,C] · W[C,(r+2)·G/t·d] + b → this rank's groups' [q heads | k | v], (B, T,
    (r+2)·g_r·d).

    The fused weight's columns, viewed as (r + 2, G, d), are each group's r query heads, then
    its key, then its value (``nn.attention``); with G = H, [q heads | k heads | v heads].
    Rank r takes its groups ``chunks.bounds(G, t)[r]`` of every one of the r + 2."""

    def __init__(self, linear, comm, groups: int, per_group: int):
        c, d = linear.weight.shape[0], linear.weight.shape[1] // ((per_group + 2) * groups)
        self.tp_layouts = {"weight": Split(axis=2, view=(c, per_group + 2, groups, d)),
                           "bias": Split(axis=1, view=(per_group + 2, groups, d))}
        super().__init__(linear, comm)


class HeadParallelProj(RowParallelLinear):
    """X[B,T,H/t·d] · W[H/t·d,C] → Σ_r → Y[B,T,C], + b[C]: the rows of this rank's heads,
    query head j·G + g of each of its groups g."""

    def __init__(self, linear, comm, groups: int, per_group: int):
        c = linear.weight.shape[1]
        d = c // (groups * per_group)
        rows = (Split(axis=0, view=(groups, d, c)) if per_group == 1 else
                Split(axis=1, view=(per_group, groups, d, c)))
        self.tp_layouts = {**self.tp_layouts, "weight": rows}
        super().__init__(linear, comm)


class SequenceParallelQKV(SequenceParallelColumnLinear, HeadParallelQKV):
    """X[B,T/t,C] → all-gather along T → HeadParallelQKV (Korthikanti et al. 2022, §4.2.2)."""


class SequenceParallelProj(SequenceParallelRowLinear, HeadParallelProj):
    """HeadParallelProj with a reduce-scatter along T in place of Σ_r: Y[B,T/t,C], + b[C] on
    this rank's tokens (b ``PARTIAL``; Korthikanti et al. 2022, §4.2.2)."""


class ParallelAttention(Module):
    """X[B,T,C] → Y[B,T,C], both replicated; rank r computes the key/value groups
    ``chunks.bounds(G, t)[r]`` and their query heads (every head where G = H).

    Megatron §3, Fig. 3b: the heads are independent, so the fused QKV weight splits by heads
    (column-parallel), each rank attends with its own heads, and the output projection splits
    by the same heads' rows (row-parallel): one f before QKV, one g after the projection, so
    one all-reduce forward and one backward. A group's query heads share its key and value,
    so a rank takes whole groups. A rank may hold no head; it still takes part. Its attention
    core is one device's, over its heads, with the probabilities dropped out as the whole
    (B, H, T, T) would be (``HeadDropout``)."""

    qkv_class, proj_class = HeadParallelQKV, HeadParallelProj

    def __init__(self, attn, comm):
        self.n_heads, self.kv_heads = attn.n_heads, attn.kv_heads  # H and G, the whole layer's
        self.per_group = attn.n_heads // attn.kv_heads  # r
        self.head_dim = attn.proj.weight.shape[0] // attn.n_heads  # d
        self.qkv = self.qkv_class(attn.qkv, comm, attn.kv_heads, self.per_group)
        self.proj = self.proj_class(attn.proj, comm, attn.kv_heads, self.per_group)
        self.core = AttentionCore(HeadDropout(attn.core.dropout.p, comm, attn.kv_heads,
                                              self.per_group))

    def forward(self, x):
        qkv = self.qkv(x)  # (B, T, (r+2)·g_r·d); f (or the all-gather along T) inside
        q, k, v = split_qkv(qkv, self.per_group, self.head_dim)  # (B,r·g_r,T,d), (B,g_r,T,d)
        y = self.core(q, k, v)  # (B, r·g_r, T, d): Vaswani eq. 1, this rank's heads
        b, heads, t, d = y.shape
        return self.proj(y.permute(0, 2, 1, 3).reshape(b, t, heads * d))  # (B, T, C); g inside


class SequenceParallelAttention(ParallelAttention):
    """X[B,T/t,C] → Y[B,T/t,C], sequence shards (``chunks.bounds(T, t)``): the all-gather along
    T before QKV replaces f, the reduce-scatter after the projection replaces g (Korthikanti
    et al. 2022, §4.2.2). Between them run ParallelAttention's heads over the whole sequence."""

    qkv_class, proj_class = SequenceParallelQKV, SequenceParallelProj
