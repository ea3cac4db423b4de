"""The parameters of ``nn.GPT`` from its sizes alone: per block (whole, or one tensor-parallel
rank's), per pipeline layer, in all, and array by array in the order the model defines them
(which the engine's gradient buckets pack, ``comm/buckets.py``). Its key/value width ``kv`` =
G·d, G key/value heads of d = C/H (grouped-query attention, Ainslie et al. 2023; None: C, one
per head), and its feed-forward width ``wide`` = F (None: 4C) are ``nn.Block``'s."""

from __future__ import annotations


def gpt_block(c: int, q: int, f: int, kv: int | None = None) -> int:
    """Parameters of one GPT block of width C on a rank that holds ``q`` = h_r·d of its query
    width, ``kv`` = g_r·d of its key/value width (None: q, multi-head attention's) and ``f`` of
    its F feed-forward units (C, G·d and F on one device, split over t ranks by Megatron,
    Shoeybi et al. 2019, §3, whole groups to a rank; ``memory_models.Sizes``' ``q``, ``kv`` and
    ``hidden``): 6C replicated (the two LayerNorms' γ and β, the biases of the two
    row-parallel layers, the projection and W₂), and its slices of QKV (C·(q + 2kv) + q +
    2kv), the projection (q·C), W₁ (C·f + f) and W₂ (f·C). On one device with G = H and F =
    4C, 12C² + 13C: Q, K, V and the projection 4C², the feed-forward 8C², their biases 9C and
    the LayerNorms 4C."""
    qkv = q + 2 * (q if kv is None else kv)  # (H + 2G)·d on one device
    return 6 * c + (c * qkv + qkv) + q * c + (c * f + f) + f * c


def gpt_layers(vocab: int, seq_len: int, d_model: int, n_layers: int, *,
               kv: int | None = None, wide: int | None = None) -> list[int]:
    """Parameters of each of ``nn.GPT``'s pipeline layers, as ``partition.parameter_counts``
    counts them: [embedding, block 0, …, block L−1, final norm and head]. The embedding's token
    V·C and position T·C tables, each block's :func:`gpt_block` on one device, the final
    LayerNorm's 2C and the bias-free head's C·V; a head tied to the token table (Press & Wolf
    2017) holds that table, counted here in both layers that hold it."""
    v, t, c = vocab, seq_len, d_model
    block = gpt_block(c, c, 4 * c if wide is None else wide, kv)
    return [v * c + t * c, *[block] * n_layers, 2 * c + c * v]


def gpt_parameters(vocab: int, seq_len: int, d_model: int, n_layers: int,
                   tied: bool = False, *, kv: int | None = None,
                   wide: int | None = None) -> int:
    """Ψ of ``nn.GPT``: its layers' parameters (:func:`gpt_layers`), the token table once when
    the head is ``tied`` to it."""
    embedding, block, head = gpt_layers(vocab, seq_len, d_model, 1, kv=kv, wide=wide)
    return embedding + n_layers * block + head - tied * vocab * d_model


def gpt_arrays(vocab: int, seq_len: int, d_model: int, n_layers: int, tied: bool = False, *,
               kv: int | None = None, wide: int | None = None) -> tuple[int, ...]:
    """Elements of each of ``nn.GPT``'s parameter arrays, in definition order: the token and
    position tables; each block's LayerNorm γ and β, QKV's weight and bias ((H + 2G)·d
    columns), the projection's, the second LayerNorm's, W₁'s and W₂'s; the final LayerNorm's;
    the head, unless ``tied``."""
    v, t, c = vocab, seq_len, d_model
    qkv, f = c + 2 * (c if kv is None else kv), 4 * c if wide is None else wide
    block = (c, c, c * qkv, qkv, c * c, c, c, c, c * f, f, f * c, c)
    return (v * c, t * c, *block * n_layers, c, c, *(() if tied else (c * v,)))
