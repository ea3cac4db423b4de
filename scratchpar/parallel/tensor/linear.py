"""Megatron's column- and row-parallel linear layers, cut from a single-device Linear, and their
sequence-parallel variants.

Rank r of a tp group of t ranks holds a slice of the weight W (D, F) of ``nn.Linear``:

    column:  X[B,D] · W[D,F/t] + b[F/t] → Y[B,F/t]           (f before: X is copied to each)
    row:     X[B,D/t] · W[D/t,F] → partial Y[B,F], Σ_r → Y[B,F], + b[F]   (g after)

(Shoeybi et al. 2019, §3, eq. 3 and Fig. 3a.) Slices follow ``chunks.bounds``, so t need not
divide D or F: the first D mod t ranks hold one row (or column) more. Each layer cuts its
parameters through its own ``tp_layouts``, so the layout and the slicing never disagree. A
column layer enters the parallel region in ``enter`` and a row layer leaves it in ``leave``:
the sequence-parallel variants change only those (Korthikanti et al. 2022, §4.2).
"""

from __future__ import annotations

from ...autograd import functional as F
from ...nn.module import Module, Parameter
from ...nn.unfilled import part
from .. import duals
from .layout import PARTIAL, Split

SEQUENCE = 1  # the sequence axis of (B, T, C) activations


def cut(param, layout, comm) -> Parameter | None:
    """This rank's own copy of ``param`` (nothing shared with it): its shard under a ``Split``
    layout, else the whole (replicated, or ``PARTIAL``)."""
    if param is None:
        return None
    if isinstance(layout, Split):
        return Parameter(layout.take(param.data, comm.rank, comm.size))  # a copy of its slice
    return Parameter(part(param.data))


class ColumnParallelLinear(Module):
    """X[B,D] · W[D,F/t] + b[F/t] → Y[B,F/t]; with ``gather_output``, Y[B,F] on every rank,
    for consumers that every rank runs alike (backward keeps this rank's slice).

    Forward starts with Megatron's f (identity; its backward sums ∂L/∂X over the group, since
    every rank's slice of the output depends on all of X)."""

    tp_layouts = {"weight": Split(axis=1), "bias": Split(axis=0)}

    def __init__(self, linear, comm, gather_output: bool = False):
        self.comm, self.gather_output = comm, gather_output
        self.weight = cut(linear.weight, self.tp_layouts["weight"], comm)  # (D, F/t)
        self.bias = cut(linear.bias, self.tp_layouts["bias"], comm)  # (F/t,)

    def enter(self, x):
        """Megatron's f: X whole on every rank; backward sums ∂L/∂X (Shoeybi et al. §3)."""
        return duals.identity(x, self.comm)

    def forward(self, x):
        y = F.linear(self.enter(x), self.weight, self.bias)  # (..., F/t)
        return duals.gather(y, self.comm, axis=-1) if self.gather_output else y


class RowParallelLinear(Module):
    """X[B,D/t] · W[D/t,F] → Σ_r → Y[B,F], then + b[F].

    The input arrives split along its last axis (a column-parallel layer's output). Megatron's
    g sums the partial products. Its backward passes ∂L/∂Y unchanged, so each rank's weight
    slice gets its exact gradient. The bias is added after the sum, once: it is replicated, and
    every rank computes the same gradient for it."""

    tp_layouts = {"weight": Split(axis=0), "bias": None}

    def __init__(self, linear, comm):
        self.comm = comm
        self.weight = cut(linear.weight, self.tp_layouts["weight"], comm)  # (D/t, F)
        self.bias = cut(linear.bias, self.tp_layouts["bias"], comm)  # (F,)

    def leave(self, y):
        """Megatron's g: Σ_r of the partial products, whole on every rank (Shoeybi et al. §3)."""
        return duals.all_reduce(y, self.comm)

    def forward(self, x):
        y = self.leave(F.linear(x, self.weight))  # (..., F): Σ_r partials
        return y if self.bias is None else y + self.bias


class SequenceParallelColumnLinear(ColumnParallelLinear):
    """X[B,T/t,D] → all-gather along T → X[B,T,D] · W[D,F/t] + b[F/t] → Y[B,T,F/t].

    Korthikanti et al. 2022, §4.2.2: the all-gather g replaces f. Its backward, a
    reduce-scatter ḡ, sums ∂L/∂X over the group and hands each rank its own tokens' rows."""

    def enter(self, x):
        return duals.all_gather(x, self.comm, axis=SEQUENCE)  # (B, T, D) from (B, T/t, D)


class SequenceParallelRowLinear(RowParallelLinear):
    """X[B,T,D/t] · W[D/t,F] → reduce-scatter along T → Y[B,T/t,F], then + b[F].

    Korthikanti et al. 2022, §4.2.2: the reduce-scatter ḡ replaces g, so the sum arrives cut
    into sequence shards. The bias is added to this rank's tokens only: its gradient here is a
    part, summed over the group by the strategy (``PARTIAL``)."""

    tp_layouts = {"weight": Split(axis=0), "bias": PARTIAL}

    def leave(self, y):
        return duals.reduce_scatter(y, self.comm, axis=SEQUENCE)  # (B, T/t, F)
