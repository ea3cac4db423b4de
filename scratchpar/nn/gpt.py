"""A tiny GPT: token and position embeddings, transformer blocks, a final norm and a head."""

from __future__ import annotations

import numpy as np

from ..autograd import functional as F
from ..backend import get_array_module
from .attention import Block
from .layers import Dropout, Embedding, LayerNorm, Linear
from .module import Module, ModuleList
from .moe import Experts, MixtureOfExperts, figures


class GPT(Module):
    """ids (B, T) → logits (B, T, V), for T ≤ ``max_len``.

    With ``tie_embeddings`` the head is the token embedding's transpose (Press & Wolf 2017): one
    (V, C) matrix, named ``tok.weight``, that the first and the last pipeline layer both hold.
    With ``experts``, every ``moe_every``-th block's MLP is a mixture of experts. ``kv_heads``
    key/value heads serve the ``n_heads`` query heads (grouped-query attention; None: one each),
    and each MLP is ``d_ff`` wide (None: 4·d_model).
    """

    def __init__(self, vocab_size: int, max_len: int, d_model: int, n_heads: int, n_layers: int,
                 gen: np.random.Generator, dropout: float = 0.0, dtype=np.float32, *,
                 tie_embeddings: bool = False, experts: Experts | None = None,
                 moe_every: int = 1, kv_heads: int | None = None, d_ff: int | None = None):
        self.max_len = max_len
        self.tok = Embedding(vocab_size, d_model, gen, dtype)
        self.pos = Embedding(max_len, d_model, gen, dtype)
        self.drop = Dropout(dropout)
        self.blocks = ModuleList([Block(d_model, n_heads, gen, dropout, dtype,
                                        experts if (i + 1) % moe_every == 0 else None,
                                        kv_heads=kv_heads, d_ff=d_ff)
                                  for i in range(n_layers)])
        self.ln_f = LayerNorm(d_model, dtype)
        self.head = (TiedHead(self.tok) if tie_embeddings
                     else Linear(d_model, vocab_size, gen, bias=False, dtype=dtype))
        # a tuple, so Module does not walk it: the layers hold this model's own sub-modules
        self._layers = (GPTEmbedding(self.tok, self.pos, self.drop), *self.blocks,
                        GPTOutput(self.ln_f, self.head))

    def pipeline_layers(self) -> list[Module]:
        """[embedding, block 0, …, block L−1, final norm and head]: their composition is forward."""
        return list(self._layers)

    def routing(self) -> dict:
        """The last forward's routing over its sparse blocks, each block's figures those of
        its whole micro-batch: the assignments dropped, the busiest block's load (its busiest
        expert's assignments over the mean), and the two auxiliary losses summed; empty for a
        dense model or before a forward."""
        return figures([m.stats for _, m in self.named_modules()
                        if isinstance(m, MixtureOfExperts)])

    def forward(self, ids):
        x = ids  # (B, T)
        for layer in self._layers:
            x = layer(x)  # (B, T, C), and (B, T, V) after the last
        return x


class GPTEmbedding(Module):
    """ids (B, T) → (B, T, C): token plus position embeddings, then dropout. Under context
    parallelism (a ``context``, :mod:`scratchpar.parallel.context`) the ids are this rank's
    T/cp positions of each sequence, which the position table is looked up at."""

    def __init__(self, tok: Embedding, pos: Embedding, drop: Dropout):
        self.tok, self.pos, self.drop = tok, pos, drop
        self.context = None

    def forward(self, ids):
        positions = held_positions(ids.shape[1], self.pos.weight.shape[0], self.context,
                                   get_array_module(ids))  # (T,) or (T/cp,)
        return self.drop(F.gather(self.tok.weight, ids) + F.gather(self.pos.weight, positions))


def held_positions(t: int, max_len: int, context, xp):
    """The positions of a rank's ``t`` tokens of each sequence, on ``xp``'s device: 0…t−1, or
    under ``context`` (its cp group and layout) those it holds of a sequence of t·cp; refused
    past ``max_len``."""
    whole = t * (context.comm.size if context is not None else 1)
    if whole > max_len:
        raise ValueError(f"sequence of {whole} tokens exceeds the model's max_len {max_len}")
    return xp.arange(t) if context is None else xp.asarray(context.mine(whole))


class GPTOutput(Module):
    """(B, T, C) → (B, T, V): the final LayerNorm, then the head."""

    def __init__(self, ln_f: LayerNorm, head: Module):
        self.ln_f, self.head = ln_f, head

    def forward(self, x):
        return self.head(self.ln_f(x))  # (B, T, V)


class TiedHead(Module):
    """(..., C) → (..., V): logits x·Eᵀ against the token embedding E (V, C) (Press & Wolf 2017)."""

    def __init__(self, tok: Embedding):
        self.weight = tok.weight  # the embedding's own Parameter, not a copy

    def forward(self, x):
        return F.linear(x, self.weight.T)  # (..., V)
