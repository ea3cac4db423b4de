"""Megatron's column- and row-parallel linear layers, cut from a single-device Linear.

Rank t of a tp group of size T holds a slice of the weight W (D, F) of ``nn.Linear``:

    column:  X[B,D] · W[D,F/T] + b[F/T] → Y[B,F/T]           (f before: X is copied to each)
    row:     X[B,D/T] · W[D/T,F] → partial Y[B,F], Σ_t → Y[B,F], + b[F]   (g after)

(Shoeybi et al. 2019, §3, eq. 3 and Fig. 3a.) Slices follow ``chunks.bounds``, so T need not
divide D or F: the first D mod T ranks hold one row (or column) more.
"""

from __future__ import annotations

from ...autograd import functional as F
from ...comm.chunks import bounds
from ...nn.module import Module, Parameter
from .. import duals
from .layout import Split


def column_slice(n: int, comm) -> slice:
    """The columns (or rows) of ``n`` that this rank of ``comm`` holds."""
    start, stop = bounds(n, comm.size)[comm.rank]
    return slice(start, stop)


class ColumnParallelLinear(Module):
    """X[B,D] · W[D,F/T] + b[F/T] → Y[B,F/T]; with ``gather_output``, Y[B,F] on every rank,
    for consumers that every rank runs alike (backward keeps this rank's slice).

    Forward starts with Megatron's f (identity; its backward sums ∂L/∂X over the group, since
    every rank's slice of the output depends on all of X)."""

    tp_layouts = {"weight": Split(axis=1), "bias": Split(axis=0)}

    def __init__(self, linear, comm, gather_output: bool = False):
        cols = column_slice(linear.weight.shape[1], comm)
        self.comm, self.gather_output = comm, gather_output
        self.weight = Parameter(linear.weight.data[:, cols].copy())  # (D, F/T)
        self.bias = None if linear.bias is None else Parameter(linear.bias.data[cols].copy())

    def forward(self, x):
        y = F.linear(duals.identity(x, self.comm), self.weight, self.bias)  # (..., F/T)
        return duals.gather(y, self.comm, axis=-1) if self.gather_output else y


class RowParallelLinear(Module):
    """X[B,D/T] · W[D/T,F] → Σ_t → Y[B,F], then + b[F].

    The input arrives split along its last axis (a column-parallel layer's output). Megatron's
    g sums the partial products; its backward passes ∂L/∂Y unchanged, so each rank's weight
    slice gets its exact gradient. The bias is added after the sum, once: it is replicated, and
    every rank computes the same gradient for it."""

    tp_layouts = {"weight": Split(axis=0)}

    def __init__(self, linear, comm):
        rows = column_slice(linear.weight.shape[0], comm)
        self.comm = comm
        self.weight = Parameter(linear.weight.data[rows].copy())  # (D/T, F)
        self.bias = None if linear.bias is None else Parameter(linear.bias.data.copy())  # (F,)

    def forward(self, x):
        y = duals.all_reduce(F.linear(x, self.weight), self.comm)  # (..., F): Σ_t partials
        return y if self.bias is None else y + self.bias
