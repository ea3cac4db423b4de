"""The feed-forward sublayer of a transformer block over tp: column-parallel, GELU, row-parallel."""

from __future__ import annotations

from ...nn.layers import Dropout
from ...nn.module import Sequential
from .dropout import SequenceDropout
from .linear import (
    ColumnParallelLinear,
    RowParallelLinear,
    SequenceParallelColumnLinear,
    SequenceParallelRowLinear,
)


class ParallelFeedForward(Sequential):
    """X[B,T,C] → GELU(X·W₁[C,4C/t] + b₁[4C/t]) → ·W₂[4C/t,C], Σ_r → + b₂[C] → dropout.

    Megatron §3, Fig. 3a: splitting W₁ by columns lets each rank apply GELU to its own slice
    (GELU is not linear, so a row split of W₁ would need a sum before it). W₂ split by rows then
    takes that slice as is. One all-reduce forward (g, after W₂) and one backward (f, before W₁).
    Built from the single-device block's ``mlp`` (Linear, GELU, Linear, Dropout), whose layout
    and names (``0``, ``2``) it keeps. The output is replicated, so its dropout is an ordinary
    one of its own: every rank draws the same whole mask."""

    column, row = ColumnParallelLinear, RowParallelLinear

    def __init__(self, mlp, comm):
        fc, act, proj, drop = list(mlp)
        super().__init__(self.column(fc, comm), act, self.row(proj, comm),
                         self.dropout(drop.p, comm))

    @staticmethod
    def dropout(p: float, comm):
        """The dropout after W₂, a module of this shard's own (its stream set on the shard)."""
        return Dropout(p)


class SequenceParallelFeedForward(ParallelFeedForward):
    """X[B,T/t,C] → all-gather along T → GELU(X·W₁[C,4C/t] + b₁[4C/t]) → ·W₂[4C/t,C],
    reduce-scatter along T → + b₂[C] → dropout → Y[B,T/t,C].

    Korthikanti et al. 2022, §4.2.2: the all-gather g replaces f and the reduce-scatter ḡ
    replaces g, so the dropout after W₂ masks only this rank's tokens (b₂'s gradient is a part,
    ``PARTIAL``). One all-gather and one reduce-scatter each way."""

    column, row = SequenceParallelColumnLinear, SequenceParallelRowLinear

    @staticmethod
    def dropout(p: float, comm):
        return SequenceDropout(p, comm)
