"""Recurrent language models: stacked Elman RNN or LSTM layers over token embeddings."""

from __future__ import annotations

import numpy as np

from ..autograd import Tensor
from ..autograd import functional as F
from . import init
from .layers import Embedding, Linear
from .module import Module, ModuleList, Parameter


class ElmanLayer(Module):
    """(B, T, D) → (B, T, H) with h_t = tanh(x_t·W_x + h_{t−1}·W_h + b) (Elman 1990), h_0 = 0."""

    gates = 1

    def __init__(self, d_in: int, d_hidden: int, gen: np.random.Generator, dtype=np.float32):
        self.input = Linear(d_in, self.gates * d_hidden, gen, dtype=dtype)  # x·W_x + b
        self.recurrent = Parameter(init.orthogonal_blocks(gen, d_hidden, self.gates, dtype))  # W_h
        self.d_hidden = d_hidden

    def forward(self, x):
        b, t = x.shape[:2]
        xw = self.input(x)  # (B, T, G·H): the input part of every step at once
        zeros = Tensor(xw.xp.zeros((b, self.d_hidden), dtype=xw.dtype))  # (B, H)
        state = self.initial_state(zeros)
        outputs = []
        for step in range(t):
            state = self.cell(F.getitem(xw, (slice(None), step)), state)
            outputs.append(state[0])  # (B, H)
        return F.stack(outputs, axis=1)  # (B, T, H)

    def initial_state(self, zeros):
        return (zeros,)

    def cell(self, xw_t, state):
        (h,) = state
        return (F.tanh(xw_t + h @ self.recurrent),)


class LSTMLayer(ElmanLayer):
    """The same with an LSTM cell (Hochreiter & Schmidhuber 1997; Graves 2013, eq. 7–11)."""

    gates = 4

    def initial_state(self, zeros):
        return zeros, zeros

    def cell(self, xw_t, state):
        h, c = state
        i, f, g, o = F.split(xw_t + h @ self.recurrent, 4, axis=-1)  # (B, H) each
        c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)  # c_t = f⊙c_{t−1} + i⊙g
        return F.sigmoid(o) * F.tanh(c), c  # h_t = o⊙tanh(c_t)


class RNNLanguageModel(Module):
    """ids (B, T) → logits (B, T, V): embedding, ``n_layers`` Elman layers (each one's states the
    next one's inputs), and a linear head."""

    layer = ElmanLayer

    def __init__(self, vocab_size: int, d_embed: int, d_hidden: int, gen: np.random.Generator,
                 dtype=np.float32, n_layers: int = 1):
        if n_layers < 1:
            raise ValueError(f"n_layers must be at least 1, got {n_layers}")
        self.embed = Embedding(vocab_size, d_embed, gen, dtype)
        self.layers = ModuleList([self.layer(d_hidden if i else d_embed, d_hidden, gen, dtype)
                                  for i in range(n_layers)])
        self.head = Linear(d_hidden, vocab_size, gen, dtype=dtype)

    def pipeline_layers(self) -> list[Module]:
        """[embedding, recurrent layer 0, …, head]: their composition is forward."""
        return [self.embed, *self.layers, self.head]

    def forward(self, ids):
        x = ids  # (B, T)
        for layer in self.pipeline_layers():
            x = layer(x)  # (B, T, E), then (B, T, H), and (B, T, V) after the head
        return x


class LSTMLanguageModel(RNNLanguageModel):
    """The same with LSTM layers."""

    layer = LSTMLayer

