"""A tiny GPT: token and position embeddings, transformer blocks, a final norm and a head."""

from __future__ import annotations

import numpy as np

from ..autograd import functional as F
from ..backend import get_array_module
from .attention import Block
from .layers import Dropout, Embedding, LayerNorm, Linear
from .module import Module, ModuleList


class GPT(Module):
    """ids (B, T) → logits (B, T, V), for T ≤ ``max_len``."""

    def __init__(self, vocab_size: int, max_len: int, d_model: int, n_heads: int, n_layers: int,
                 gen: np.random.Generator, dropout: float = 0.0, dtype=np.float32):
        self.max_len = max_len
        self.tok = Embedding(vocab_size, d_model, gen, dtype)
        self.pos = Embedding(max_len, d_model, gen, dtype)
        self.drop = Dropout(dropout)
        self.blocks = ModuleList([Block(d_model, n_heads, gen, dropout, dtype)
                                  for _ in range(n_layers)])
        self.ln_f = LayerNorm(d_model, dtype)
        self.head = Linear(d_model, vocab_size, gen, bias=False, dtype=dtype)

    def forward(self, ids):
        t = ids.shape[1]
        if t > self.max_len:
            raise ValueError(f"sequence of {t} tokens exceeds the model's max_len {self.max_len}")
        positions = get_array_module(ids).arange(t)  # (T,)
        x = self.drop(F.gather(self.tok.weight, ids) + F.gather(self.pos.weight, positions))
        for block in self.blocks:
            x = block(x)  # (B, T, C)
        return self.head(self.ln_f(x))  # (B, T, V)
