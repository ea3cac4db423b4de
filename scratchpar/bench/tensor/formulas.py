"""What a rank of a tensor-parallel block holds, in bytes, as this engine counts it: its
parameters, and its activations as the memory estimate counts a block's."""

from __future__ import annotations

from ...comm.chunks import counts
from ...train.memory_models import Sizes, gpt_layer

FLOAT32 = 4


def shares(cfg: dict, t: int, r: int) -> tuple[int, int, int]:
    """Rank r's heads h_r, hidden units f_r of 4C, and tokens T_r of the sequence (uneven
    splits, ``chunks.counts``, counted per rank)."""
    return (counts(cfg["heads"], t)[r], counts(4 * cfg["d_model"], t)[r],
            counts(cfg["seq"], t)[r])


def param_formula(cfg: dict, t: int, r: int) -> int:
    """Bytes of rank r's shard of one block, 4 · (6h + (12h² + 7h)/t) when t divides evenly:
    6C replicated (γ, β of 2 LayerNorms, the biases of the 2 row-parallel layers); its slices of
    QKV (C·3q + 3q), the projection (q·C), W₁ (C·f + f) and W₂ (f·C), q = h_r·d, f = f_r.
    Gradients hold the same bytes (a PARTIAL gradient is whole-shaped)."""
    c = cfg["d_model"]
    heads, f, _ = shares(cfg, t, r)
    q = heads * (c // cfg["heads"])
    return FLOAT32 * (6 * c + (c * 3 * q + 3 * q) + q * c + (c * f + f) + f * c)


def activation_formula(cfg: dict, t: int, r: int, layer: str) -> int:
    """Bytes the forward's graph keeps on rank r (``held.graph_bytes``): one block as
    ``memory_models.gpt_layer`` counts it in float32 without dropout, on the rank's own heads,
    hidden units and sequence shard, beside the block's input and output (its sequence shards
    with SP), which a graph of one block holds too, and the causal mask (s² bool bytes). At
    even splits, with s = T, b = B, h = C, a = heads: 4 · (sbh · (6 + 16/t) + as²b/t + 2sb) + s²
    without sequence parallelism, 4 · (sbh · (2 + 4/t + 16/t) + as²b/t + 2sb/t) + s² with it."""
    b, s, c = cfg["batch"], cfg["seq"], cfg["d_model"]
    heads, f, s_r = shares(cfg, t, r)
    n, shard = b * s, b * s_r if layer == "sequence" else b * s
    sizes = Sizes(n, c, shard, heads * (c // cfg["heads"]), f, b * heads * s * s)
    return gpt_layer(sizes, FLOAT32, FLOAT32, False, "none") + FLOAT32 * 2 * shard * c + s * s
