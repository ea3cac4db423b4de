"""Causal multi-head self-attention and the pre-norm transformer block (Vaswani et al. 2017)."""

from __future__ import annotations

import math

import numpy as np

from ..autograd import functional as F
from .layers import GELU, Dropout, LayerNorm, Linear
from .module import Module, Sequential
from .moe import Experts, MixtureOfExperts


def attention_weights(q, k, hidden=None):
    """softmax(QKᵀ/√d) (..., Tq, Tk) of q (..., Tq, d) and k (..., Tk, d), the ``hidden`` (Tq,
    Tk) entries (True) at −∞ first (Vaswani et al. 2017, eq. 1): what each query takes of each
    key."""
    scores = (q @ k.transpose()) * (1.0 / math.sqrt(q.shape[-1]))  # (..., Tq, Tk)
    if hidden is not None:
        scores = F.masked_fill(scores, hidden, float("-inf"))
    return F.softmax(scores, axis=-1)


class AttentionCore(Module):
    """q, k, v (B, H, T, d) → (B, H, T, d): softmax(QKᵀ/√d, the future hidden)·V, with dropout
    on the weights (Vaswani et al. 2017, eq. 1). Its (B, H, T, T) arrays are the part of a
    layer's activations that grows with T²: what selective recomputation runs again
    (Korthikanti et al. 2022, §4.2). ``dropout``: its probability, or the Dropout itself (a
    tensor-parallel rank's, which masks its heads' slice of the whole)."""

    def __init__(self, dropout: float | Dropout = 0.0):
        self.dropout = dropout if isinstance(dropout, Dropout) else Dropout(dropout)
        self._mask = None

    def causal_mask(self, t: int, xp):
        """(T, T) bool, True above the diagonal: the future positions to hide."""
        if self._mask is None or self._mask.shape[0] < t:
            self._mask = xp.triu(xp.ones((t, t), dtype=bool), k=1)  # built on q's device
        return self._mask[:t, :t]

    def forward(self, q, k, v):
        weights = attention_weights(q, k, self.causal_mask(q.shape[-2], q.xp))  # (B, H, T, T)
        return self.dropout(weights) @ v  # (B, H, T, d)


class CausalSelfAttention(Module):
    """(B, T, C) → (B, T, C); each position attends to itself and earlier ones, H heads."""

    def __init__(self, d_model: int, n_heads: int, gen: np.random.Generator, dropout: float = 0.0,
                 dtype=np.float32):
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        self.n_heads = n_heads
        self.qkv = Linear(d_model, 3 * d_model, gen, dtype=dtype)
        self.proj = Linear(d_model, d_model, gen, dtype=dtype)
        self.core = AttentionCore(dropout)

    def forward(self, x):
        b, t, c = x.shape
        h, d = self.n_heads, c // self.n_heads
        qkv = self.qkv(x).reshape(b, t, 3, h, d).permute(2, 0, 3, 1, 4)  # (3, B, H, T, d)
        y = self.core(qkv[0], qkv[1], qkv[2])  # (B, H, T, d)
        return self.proj(y.permute(0, 2, 1, 3).reshape(b, t, c))  # (B, T, H·d) → (B, T, C)


class Block(Module):
    """x + attn(LN(x)), then x + MLP(LN(x)): the pre-norm block of GPT-2 (Radford et al. 2019);
    with ``experts``, its MLP a mixture of them (:class:`~.moe.MixtureOfExperts`)."""

    def __init__(self, d_model: int, n_heads: int, gen: np.random.Generator, dropout: float = 0.0,
                 dtype=np.float32, experts: Experts | None = None):
        self.ln1 = LayerNorm(d_model, dtype)
        self.attn = CausalSelfAttention(d_model, n_heads, gen, dropout, dtype)
        self.ln2 = LayerNorm(d_model, dtype)
        feed_forward = ([MixtureOfExperts(d_model, experts, gen, dtype)] if experts else
                        [Linear(d_model, 4 * d_model, gen, dtype=dtype), GELU(),
                         Linear(4 * d_model, d_model, gen, dtype=dtype)])
        self.mlp = Sequential(*feed_forward, Dropout(dropout))  # routed experts, or one MLP

    def forward(self, x):
        x = x + self.attn(self.ln1(x))  # (B, T, C)
        return x + self.mlp(self.ln2(x))
