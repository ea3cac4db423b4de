"""Autoregressive sampling from a trained language model, one token at a time, with a cache.

Each new token costs one position's work, not the whole sequence's again:
- the GPT keeps every block's keys and values of the positions so far (the KV cache): a new
  position computes only its own query, key and value and attends to the cached ones;
- a recurrent model keeps each layer's state (h, and c for an LSTM): a new token is one cell
  step per layer.

A GPT was trained on at most ``max_len`` positions. When the window is full, the cache is
rebuilt from the last half of the tokens (one forward of ``max_len / 2`` positions), so that
the context stays between half the window and all of it and each token stays cheap.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Tensor, no_grad
from ..autograd import functional as F
from ..backend import to_host
from .attention import attend, split_qkv
from .gpt import GPT


class GPTDecoder:
    """Next-token logits of a :class:`GPT`, one position at a time, from its KV cache."""

    def __init__(self, model: GPT):
        self.model = model
        self.tokens: list[int] = []  # what the cache holds, at positions 0 … len − 1
        self.keys: list = []  # per block: (B, H, t, d) keys of the positions so far
        self.values: list = []

    def prime(self, ids: list[int]) -> np.ndarray:
        """Logits (V,) after ``ids`` (the cache rebuilt from their last ``max_len``)."""
        ids = ids[-self.model.max_len:]
        self.tokens, self.keys, self.values = [], [], []
        return self._forward(ids)

    def advance(self, token: int) -> np.ndarray:
        """Logits (V,) after one more ``token``."""
        if len(self.tokens) == self.model.max_len:  # full: keep the last half as context
            return self.prime((self.tokens + [token])[-(self.model.max_len // 2 or 1):])
        return self._forward([token])

    def _forward(self, ids: list[int]) -> np.ndarray:
        """The new positions through every block, their keys and values appended to the cache:
        the logits after the last."""
        m, past = self.model, len(self.tokens)
        xp = m.tok.weight.xp
        with no_grad():
            new = xp.asarray([ids])  # (1, t)
            positions = xp.arange(past, past + len(ids))  # (t,)
            x = F.gather(m.tok.weight, new) + F.gather(m.pos.weight, positions)  # (1, t, C)
            for i, block in enumerate(m.blocks):
                x = x + self._attend(block.attn, block.ln1(x), i)
                x = x + block.mlp(block.ln2(x))
            logits = m.head(m.ln_f(x))  # (1, t, V)
        self.tokens += ids
        return logits.data[0, -1]

    def _attend(self, attn, x, i: int):
        """Causal self-attention of the new positions ``x`` (1, t, C) over the cached ones and
        themselves, as ``CausalSelfAttention.forward`` computes it (Vaswani et al. 2017, eq. 1):
        the cache holds the G key/value heads, a grouped layer's fewer than its H."""
        b, t, c = x.shape
        q, k, v = split_qkv(attn.qkv(x), attn.n_heads // attn.kv_heads, c // attn.n_heads)
        k, v = k.data, v.data  # (1, G, t, d)
        if i == len(self.keys):
            self.keys.append(k)
            self.values.append(v)
        else:
            xp = x.xp
            self.keys[i] = xp.concatenate([self.keys[i], k], axis=2)  # (1, G, T, d)
            self.values[i] = xp.concatenate([self.values[i], v], axis=2)
        keys, values = Tensor(self.keys[i]), Tensor(self.values[i])
        hidden = None
        if t > 1:  # the new positions among themselves: the last t columns are causal
            past = keys.shape[2] - t
            hidden = x.xp.triu(x.xp.ones((t, past + t), dtype=bool), k=past + 1)  # (t, T)
        y = attend(q, keys, values, hidden)  # (1, H, t, d)
        return attn.proj(y.permute(0, 2, 1, 3).reshape(b, t, c))  # (1, t, C)


class RecurrentDecoder:
    """Next-token logits of an RNN or LSTM language model, one cell step per layer per token."""

    def __init__(self, model):
        self.model = model
        self.states: list = []  # per layer: (h,) or (h, c), each (1, H)

    def prime(self, ids: list[int]) -> np.ndarray:
        """Logits (V,) after ``ids``, from the zero state."""
        self.states = []
        for token in ids:
            logits = self.advance(token)
        return logits

    def advance(self, token: int) -> np.ndarray:
        """Logits (V,) after one more ``token``."""
        m = self.model
        with no_grad():
            x = m.embed(m.embed.weight.xp.asarray([token]))  # (1, E)
            for i, layer in enumerate(m.layers):
                if i == len(self.states):
                    zeros = Tensor(x.xp.zeros((1, layer.d_hidden), dtype=x.dtype))
                    self.states.append(layer.initial_state(zeros))
                self.states[i] = layer.cell(layer.input(x), self.states[i])
                x = self.states[i][0]  # (1, H)
            return m.head(x).data[0]


def decoder_for(model):
    """The cached decoder of a language model: a GPT's or a recurrent one's."""
    return GPTDecoder(model) if isinstance(model, GPT) else RecurrentDecoder(model)


def pick(logits: np.ndarray, temperature: float, top_k: int | None,
         gen: np.random.Generator) -> int:
    """A token drawn from softmax(logits / temperature), among the ``top_k`` largest logits
    (all of them without); temperature 0: the largest (greedy)."""
    z = np.asarray(logits, dtype=np.float64)  # (V,) on the host
    if temperature == 0:
        return int(z.argmax())
    if top_k is not None and top_k < z.size:
        z = np.where(z >= np.partition(z, -top_k)[-top_k], z, -np.inf)
    p = np.exp((z - z.max()) / temperature)
    return int(gen.choice(z.size, p=p / p.sum()))


def generate(model, prompt: list[int], n: int, temperature: float = 1.0,
             top_k: int | None = None, seed: int = 0, forbidden=(),
             restart: tuple[int, list[int]] | None = None):
    """Yield ``n`` tokens sampled after ``prompt`` (at least one id) one at a time; ids in
    ``forbidden`` (padding) are never drawn. With ``restart`` = (end, start), drawing ``end``
    begins anew from ``start``, as every training sequence began (a sentence's end, then the
    next sentence's start, with no context between). The model is put in evaluation mode."""
    model.eval()
    decoder, gen = decoder_for(model), np.random.default_rng(seed)
    logits = decoder.prime(list(prompt))
    for _ in range(n):
        z = to_host(logits).astype(np.float64)  # (V,), a copy on the host
        z[list(forbidden)] = -np.inf
        token = pick(z, temperature, top_k, gen)
        yield token
        if restart is not None and token == restart[0]:
            logits = decoder.prime(list(restart[1]))
        else:
            logits = decoder.advance(token)
