"""The tiny GPT split across a tp group: vocabulary-parallel ends, tensor-parallel blocks."""

from __future__ import annotations

import math

from ...autograd import functional as F
from ...backend import get_array_module
from ...comm.chunks import bounds
from ...nn.gpt import TiedHead, held_positions
from ...nn.loss import PAD
from ...nn.module import Module, ModuleList, Parameter
from ...nn.unfilled import part
from .block import ParallelBlock, SequenceParallelBlock, SequenceParallelLayerNorm, copy_norm
from .cross_entropy import vocab_parallel_cross_entropy
from .dropout import SequenceDropout
from .embedding import (
    SequenceParallelEmbedding,
    SequenceParallelTiedHead,
    VocabParallelEmbedding,
    VocabParallelTiedHead,
)
from .layout import PARTIAL
from .linear import ColumnParallelLinear, SequenceParallelColumnLinear


class TensorParallelGPT(Module):
    """ids[B,T] → logits[B,T,V/t]: this rank's vocabulary columns, scored by
    :meth:`output_loss` without ever joining them (Shoeybi et al. 2019, §3).

    Built from an ``nn.GPT``'s own weights, keeping its parameter names and order: the token
    embedding split by vocabulary rows, positions and LayerNorms replicated, each block split by
    heads and hidden units, the head split by vocabulary columns (or tied to the embedding's
    shard). With ``sequence_parallel`` (Korthikanti et al. 2022, §4.2) the activations between
    blocks are sequence shards (B, T/t, C): the embedding reduce-scatters along T, positions,
    dropout and LayerNorms act on this rank's tokens, and the head all-gathers them back.
    """

    def __init__(self, gpt, comm, sequence_parallel: bool = False):
        sp = sequence_parallel
        self.comm, self.max_len = comm, gpt.max_len
        self.tok = (SequenceParallelEmbedding if sp else VocabParallelEmbedding)(gpt.tok, comm)
        self.pos = (SequenceParallelPositions if sp else Positions)(gpt.pos)
        self.drop = SequenceDropout(gpt.drop.p, comm) if sp else gpt.drop
        block = SequenceParallelBlock if sp else ParallelBlock
        self.blocks = ModuleList([block(b, comm) for b in gpt.blocks])
        self.ln_f = copy_norm(gpt.ln_f, SequenceParallelLayerNorm if sp else type(gpt.ln_f))
        if isinstance(gpt.head, TiedHead):  # the embedding's own shard E[V/t,C], transposed
            self.head = (SequenceParallelTiedHead if sp else VocabParallelTiedHead)(self.tok)
        else:  # a Linear (C, V) split by columns
            self.head = (SequenceParallelColumnLinear if sp else ColumnParallelLinear)(gpt.head,
                                                                                       comm)
        # a tuple, so Module does not walk it: the same stages as nn.GPT.pipeline_layers()
        self._layers = (TensorParallelEmbedding(self.tok, self.pos, self.drop, comm, sp),
                        *self.blocks, TensorParallelOutput(self.ln_f, self.head))

    def pipeline_layers(self) -> list[Module]:
        """[embedding, block 0, …, block L−1, final norm and head], as ``nn.GPT`` lists them."""
        return list(self._layers)

    def forward(self, ids):
        x = ids  # (B, T)
        for layer in self._layers:
            x = layer(x)  # (B, T, C) or (B, T/t, C); (B, T, V/t) after the last
        return x

    def output_loss(self, logits, targets, reduction: str = "mean"):
        """The language-modelling loss of logits[B,T,V/t] against targets (B, T), padding
        ignored as ``nn.lm_output_loss`` ignores it; the same on every rank of the group."""
        rows = math.prod(targets.shape)  # B·T, stated: a rank owning no column has V/t = 0
        return vocab_parallel_cross_entropy(logits.reshape(rows, logits.shape[-1]),
                                            targets.reshape(-1), self.comm, ignore_index=PAD,
                                            reduction=reduction)


class Positions(Module):
    """A copy of the position table P (max_len, C), replicated on every rank."""

    def __init__(self, pos):
        self.weight = Parameter(part(pos.weight.data))  # (max_len, C)


class SequenceParallelPositions(Positions):
    """P looked up only at this rank's positions: each rank's gradient is the part from its
    tokens, summed over the group (Korthikanti et al. 2022, §4.2.2)."""

    tp_layouts = {"weight": PARTIAL}


class TensorParallelEmbedding(Module):
    """ids[B,T] → E[ids] + P[positions], dropout → X[B,T,C] (or its sequence shard X[B,T/t,C],
    rank r's positions ``bounds(T, t)[r]``). Under context parallelism (a ``context``, see
    :func:`~scratchpar.parallel.context.gpt.context_parallel`) the ids are this rank's T/cp
    positions of the sequence, which P is looked up at."""

    def __init__(self, tok, pos, drop, comm, sequence_parallel: bool):
        self.tok, self.pos, self.drop = tok, pos, drop
        self.comm, self.sequence_parallel = comm, sequence_parallel
        self.context = None

    def forward(self, ids):
        t = ids.shape[1]
        held = held_positions(t, self.pos.weight.shape[0], self.context,
                              get_array_module(ids))  # (T,) or (T/cp,)
        start, stop = (bounds(t, self.comm.size)[self.comm.rank] if self.sequence_parallel
                       else (0, t))
        positions = held[start:stop]  # (T,), or this rank's sequence shard's
        return self.drop(self.tok(ids) + F.gather(self.pos.weight, positions))


class TensorParallelOutput(Module):
    """X[B,T,C] (or X[B,T/t,C]) → the final LayerNorm → logits[B,T,V/t]."""

    def __init__(self, ln_f, head):
        self.ln_f, self.head = ln_f, head

    def forward(self, x):
        return self.head(self.ln_f(x))  # (B, T, V/t)
