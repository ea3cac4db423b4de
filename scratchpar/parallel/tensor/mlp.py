"""The parallel MLP of a transformer block: column-parallel, GELU, row-parallel."""

from __future__ import annotations

from ...nn.module import Sequential
from .linear import ColumnParallelLinear, RowParallelLinear


class ParallelMLP(Sequential):
    """X[B,T,C] → GELU(X·W₁[C,4C/t] + b₁[4C/t]) → ·W₂[4C/t,C], Σ_t → + b₂[C] → dropout.

    Megatron §3, Fig. 3a: splitting W₁ by columns lets each rank apply GELU to its own slice
    (GELU is not linear, so a row split of W₁ would need a sum before it); W₂ split by rows then
    takes that slice as is. One all-reduce forward (g, after W₂) and one backward (f, before W₁).
    Built from the single-device block's ``mlp`` (Linear, GELU, Linear, Dropout), whose layout
    and names (``0``, ``2``) it keeps."""

    column, row = ColumnParallelLinear, RowParallelLinear

    def __init__(self, mlp, comm):
        fc, act, proj, drop = list(mlp)
        super().__init__(self.column(fc, comm), act, self.row(proj, comm), drop)
