"""Causal multi-head self-attention and the pre-norm transformer block (Vaswani et al. 2017),
with its key and value heads shared by groups of query heads (Ainslie et al. 2023).

Grouped-query attention keeps G ≤ H key/value heads, each shared by r = H/G query heads: query
head h attends with key/value head h mod G. The fused QKV weight's columns, viewed as
(r + 2, G, d), are the r query heads of each group, then its key, then its value; with G = H
(r = 1) that is [q | k | v], multi-head attention's layout. A tensor-parallel rank then takes
whole groups by one split of that view. (Megatron-LM and Llama share head h's key/value by
h // r: a renumbering of the heads, the same attention.)"""

from __future__ import annotations

import math

import numpy as np

from .. import kernels
from ..autograd import functional as F
from .layers import GELU, Dropout, LayerNorm, Linear
from .module import Module, Sequential
from .moe import Experts, MixtureOfExperts


def attention_weights(q, k, hidden=None):
    """softmax(QKᵀ/√d) (..., Tq, Tk) of q (..., Tq, d) and k (..., Tk, d), the ``hidden`` (Tq,
    Tk) entries (True) at −∞ first (Vaswani et al. 2017, eq. 1): what each query takes of each
    key. Where the fused ops run (``scratchpar/kernels``), one op forms them."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    if kernels.fused(q.data):
        return F.scaled_masked_softmax(q @ k.transpose(), scale, hidden)  # (..., Tq, Tk)
    scores = (q @ k.transpose()) * scale  # (..., Tq, Tk)
    if hidden is not None:
        scores = F.masked_fill(scores, hidden, float("-inf"))
    return F.softmax(scores, axis=-1)


def attend(q, k, v, hidden=None, dropout=None):
    """q (B, H, Tq, d), k and v (B, G, Tk, d) → (B, H, Tq, d): softmax(QKᵀ/√d)·V (Vaswani et
    al. 2017, eq. 1), query head h with key/value head h mod G; the weights (B, H, Tq, Tk), or
    (B, H/G, G, Tq, Tk) where G < H, through ``dropout`` if given."""
    b, h, tq, d = q.shape
    g = k.shape[1]
    if g != h:  # query head j·G + g with key/value head g: (B, r, G, Tq, d), (B, 1, G, Tk, d)
        q = q.reshape(b, h // g, g, tq, d)
        k, v = (x.reshape(b, 1, g, *x.shape[2:]) for x in (k, v))
    weights = attention_weights(q, k, hidden)
    out = (weights if dropout is None else dropout(weights)) @ v
    return out if g == h else out.reshape(b, h, tq, d)


def split_qkv(qkv, per_group: int, d: int):
    """The fused projection (B, T, (r + 2)·G·d) → q (B, r·G, T, d), k and v (B, G, T, d), for
    groups of r ``per_group`` query heads of ``d`` each (the module's docstring: query head
    j·G + g is group g's j-th). G may be 0: a tensor-parallel rank that holds no head."""
    b, t = qkv.shape[:2]
    r, groups = per_group, qkv.shape[2] // ((per_group + 2) * d)
    qkv = qkv.reshape(b, t, r + 2, groups, d).permute(2, 0, 3, 1, 4)  # (r + 2, B, G, T, d)
    q = qkv[0] if r == 1 else qkv[:r].permute(1, 0, 2, 3, 4).reshape(b, r * groups, t, d)
    return q, qkv[r], qkv[r + 1]


class AttentionCore(Module):
    """q (B, H, T, d), k and v (B, G, T, d) → (B, H, T, d): softmax(QKᵀ/√d, the future
    hidden)·V, query head h with key/value head h mod G (:func:`attend`), with dropout on the
    weights (Vaswani et al. 2017, eq. 1). Its (B, H, T, T) arrays are the part of a
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
        return attend(q, k, v, self.causal_mask(q.shape[-2], q.xp), self.dropout)  # (B,H,T,d)


class CausalSelfAttention(Module):
    """(B, T, C) → (B, T, C); each position attends to itself and earlier ones, H query heads
    and G ``kv_heads`` key/value heads (None: H)."""

    def __init__(self, d_model: int, n_heads: int, gen: np.random.Generator, dropout: float = 0.0,
                 dtype=np.float32, kv_heads: int | None = None):
        groups = n_heads if kv_heads is None else kv_heads
        if d_model % n_heads or n_heads % groups:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}, or "
                             f"n_heads by kv_heads {groups}")
        self.n_heads, self.kv_heads = n_heads, groups
        d = d_model // n_heads
        self.qkv = Linear(d_model, (n_heads + 2 * groups) * d, gen, dtype=dtype)
        self.proj = Linear(d_model, d_model, gen, dtype=dtype)
        self.core = AttentionCore(dropout)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = split_qkv(self.qkv(x), self.n_heads // self.kv_heads, c // self.n_heads)
        y = self.core(q, k, v)  # (B, H, T, d)
        return self.proj(y.permute(0, 2, 1, 3).reshape(b, t, c))  # (B, T, H·d) → (B, T, C)


class Block(Module):
    """x + attn(LN(x)), then x + MLP(LN(x)): the pre-norm block of GPT-2 (Radford et al. 2019),
    its MLP C → ``d_ff`` (None: 4·C) → C; with ``experts``, its MLP a mixture of them
    (:class:`~.moe.MixtureOfExperts`), each that MLP."""

    def __init__(self, d_model: int, n_heads: int, gen: np.random.Generator, dropout: float = 0.0,
                 dtype=np.float32, experts: Experts | None = None, *, kv_heads: int | None = None,
                 d_ff: int | None = None):
        self.ln1 = LayerNorm(d_model, dtype)
        self.attn = CausalSelfAttention(d_model, n_heads, gen, dropout, dtype, kv_heads)
        self.ln2 = LayerNorm(d_model, dtype)
        wide = 4 * d_model if d_ff is None else d_ff
        feed_forward = ([MixtureOfExperts(d_model, experts, gen, dtype, wide)] if experts else
                        [Linear(d_model, wide, gen, dtype=dtype), GELU(),
                         Linear(wide, d_model, gen, dtype=dtype)])
        self.mlp = Sequential(*feed_forward, Dropout(dropout))  # routed experts, or one MLP

    def forward(self, x):
        x = x + self.attn(self.ln1(x))  # (B, T, C)
        return x + self.mlp(self.ln2(x))
