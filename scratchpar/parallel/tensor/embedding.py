"""The vocabulary-parallel embedding and the tied LM head over the same shard of its rows.

Rank r of a tp group of size t holds the rows ``bounds(V, t)[r]`` of the table E (V, D):

    embedding:  ids[B,T] → E[V/t,D] rows (zero where another rank owns the id), Σ_r → Y[B,T,D]
    tied head:  X[B,T,D] · E[V/t,D]ᵀ → logits[B,T,V/t]       (f before: X is copied to each)

(Shoeybi et al. 2019, §3: "the input embedding weight matrix E is parallelized along the
vocabulary dimension"; the logits stay split for ``vocab_parallel_cross_entropy``.) t need not
divide V: when V < t, the last ranks hold no row and add zeros.
"""

from __future__ import annotations

from ...autograd import Function, Tensor
from ...autograd import functional as F
from ...backend import get_array_module
from ...comm.chunks import bounds
from ...nn.module import Module, Parameter
from ...scatter import scatter_rows
from .. import duals
from .layout import Split


class VocabParallelEmbedding(Module):
    """ids (...) → (..., D) on every rank: E[V/t,D] looked up where this rank owns the id,
    then Megatron's g sums the ranks' parts (each id's row comes from exactly one rank).

    Cut from an ``nn.Embedding``, whose parameter name (``weight``) it keeps."""

    tp_layouts = {"weight": Split(axis=0)}

    def __init__(self, embedding, comm):
        whole = embedding.weight.data  # (V, D)
        self.comm = comm
        self.start = bounds(whole.shape[0], comm.size)[comm.rank][0]  # this rank's first id
        self.weight = Parameter(self.tp_layouts["weight"].take(whole, comm.rank, comm.size))

    def forward(self, ids):
        return duals.all_reduce(self.partial(ids), self.comm)  # (..., D): Shoeybi et al. §3, g

    def partial(self, ids):
        """(...) → (..., D): this rank's rows for the ids it owns, zero rows for the others."""
        ids = self.weight.xp.asarray(ids.data if isinstance(ids, Tensor) else ids)
        return ShardLookup.apply(self.weight, ids, start=self.start)


class SequenceParallelEmbedding(VocabParallelEmbedding):
    """ids[B,T] → Y[B,T/t,D]: as ``VocabParallelEmbedding``, but the sum over ranks is a
    reduce-scatter along the sequence, so rank r keeps positions ``bounds(T, t)[r]`` of it
    for the sequence-parallel region that follows (Korthikanti et al. 2022, §4.2: g → ḡ).
    Backward all-gathers the gradient along the sequence."""

    def forward(self, ids):
        return duals.reduce_scatter(self.partial(ids), self.comm, axis=1)  # (B, T_r, D)


class VocabParallelTiedHead(Module):
    """X[...,D] · E[V/t,D]ᵀ → logits[...,V/t]: this rank's columns of the whole logits.

    The very Parameter of the embedding it is tied to (Press & Wolf 2017), so its gradient sums
    both uses. Forward starts with Megatron's f: every rank's columns depend on all of X, so
    ∂L/∂X sums over the group. The logits go on to ``vocab_parallel_cross_entropy`` split:
    gathering them would move B·T·V numbers (Shoeybi et al. 2019, §3)."""

    tp_layouts = {"weight": Split(axis=0)}

    def __init__(self, embedding: VocabParallelEmbedding):
        self.comm = embedding.comm
        self.weight = embedding.weight  # the embedding's own Parameter, not a copy

    def forward(self, x):
        return F.linear(duals.identity(x, self.comm), self.weight.T)  # (..., V_t)


class SequenceParallelTiedHead(VocabParallelTiedHead):
    """X[B,T/t,D] → all-gather along the sequence → X[B,T,D] · E[V/t,D]ᵀ → logits[B,T,V/t].

    The input comes from the sequence-parallel region. The all-gather takes f's place, and its
    backward reduce-scatters ∂L/∂X back to each rank's positions (Korthikanti et al. 2022, §4.2)."""

    def forward(self, x):
        return F.linear(duals.all_gather(x, self.comm, axis=1), self.weight.T)  # (B, T, V_t)


class ShardLookup(Function):
    """Rows ``ids − start`` of a shard E_t (V_t, D) where ``start ≤ id < start + V_t``, zero
    rows elsewhere. Masked ids get no gradient (Megatron's masked embedding lookup)."""

    @staticmethod
    def forward(ctx, weight, ids, start):
        xp = get_array_module(weight)
        owned = (ids >= start) & (ids < start + weight.shape[0])  # (...)
        local = xp.where(owned, ids - start, 0)  # (...) an index into the shard everywhere
        ctx.shape, ctx.local, ctx.owned = weight.shape, local, owned
        if weight.shape[0] == 0:  # no rows here: nothing to look up
            return xp.zeros((*ids.shape, weight.shape[1]), weight.dtype)
        return xp.where(owned[..., None], weight[local], 0)  # (..., D)

    @staticmethod
    def backward(ctx, g):
        xp = get_array_module(g)
        grad = xp.zeros(ctx.shape, dtype=g.dtype)  # (V_t, D)
        if ctx.shape[0] == 0:
            return grad, None
        rows = xp.where(ctx.owned[..., None], g, 0)  # (..., D): the others' masked
        scatter_rows(grad, ctx.local.reshape(-1), rows.reshape(-1, ctx.shape[1]))
        return grad, None
