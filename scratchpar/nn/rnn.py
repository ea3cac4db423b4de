"""Recurrent language models: an Elman RNN and an LSTM over token embeddings."""

from __future__ import annotations

import numpy as np

from ..autograd import Tensor
from ..autograd import functional as F
from ..backend import to_device
from .layers import Embedding, Linear
from .module import Module, Parameter


class RNNLanguageModel(Module):
    """ids (B, T) → logits (B, T, V) with h_t = tanh(x_t·W_x + h_{t−1}·W_h + b) (Elman 1990)."""

    gates = 1

    def __init__(self, vocab_size: int, d_embed: int, d_hidden: int, gen: np.random.Generator,
                 dtype=np.float32):
        self.embed = Embedding(vocab_size, d_embed, gen, dtype)
        self.input = Linear(d_embed, self.gates * d_hidden, gen, dtype=dtype)  # x·W_x + b
        self.recurrent = Parameter(_orthogonal(gen, d_hidden, self.gates, dtype))  # W_h
        self.head = Linear(d_hidden, vocab_size, gen, dtype=dtype)
        self.d_hidden = d_hidden

    def forward(self, ids):
        b, t = ids.shape
        xw = self.input(self.embed(ids))  # (B, T, G·H): the input part of every step at once
        zeros = Tensor(xw.xp.zeros((b, self.d_hidden), dtype=xw.dtype))  # (B, H)
        state = self.initial_state(zeros)
        outputs = []
        for step in range(t):
            state = self.cell(F.getitem(xw, (slice(None), step)), state)
            outputs.append(state[0])  # (B, H)
        hs = F.stack(outputs, axis=1)  # (B, T, H)
        return self.head(hs)  # (B, T, V)

    def initial_state(self, zeros):
        return (zeros,)

    def cell(self, xw_t, state):
        (h,) = state
        return (F.tanh(xw_t + h @ self.recurrent),)


class LSTMLanguageModel(RNNLanguageModel):
    """The same with an LSTM cell (Hochreiter & Schmidhuber 1997; Graves 2013, eq. 7–11)."""

    gates = 4

    def initial_state(self, zeros):
        return zeros, zeros

    def cell(self, xw_t, state):
        h, c = state
        i, f, g, o = F.split(xw_t + h @ self.recurrent, 4, axis=-1)  # (B, H) each
        c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)  # c_t = f⊙c_{t−1} + i⊙g
        return F.sigmoid(o) * F.tanh(c), c  # h_t = o⊙tanh(c_t)


def _orthogonal(gen: np.random.Generator, d_hidden: int, gates: int, dtype):
    """(H, G·H): one orthogonal H×H block per gate (Saxe et al. 2014), stable recurrences."""
    blocks = [np.linalg.qr(gen.standard_normal((d_hidden, d_hidden)))[0] for _ in range(gates)]
    return to_device(np.concatenate(blocks, axis=1), dtype=dtype)
