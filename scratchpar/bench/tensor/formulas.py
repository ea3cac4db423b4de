"""What a rank of a tensor-parallel block holds, in bytes, as this engine counts it."""

from __future__ import annotations

from ...comm.chunks import counts
from ...train.memory_models import Sizes, gpt_layer

FLOAT32 = 4


def shard(cfg: dict, t: int, r: int, sequence_parallel: bool = False) -> Sizes:
    """Rank r's :class:`Sizes` of one block over t ranks: its heads' width q = h_r·d, its f_r
    hidden units of 4C and, with sequence parallelism, its tokens T_r (uneven splits counted
    per rank, ``chunks.counts``)."""
    b, s, c, heads = cfg["batch"], cfg["seq"], cfg["d_model"], counts(cfg["heads"], t)[r]
    tokens = b * (counts(s, t)[r] if sequence_parallel else s)
    return Sizes(b * s, c, tokens, heads * (c // cfg["heads"]), counts(4 * c, t)[r],
                 b * heads * s * s)


def param_formula(cfg: dict, t: int, r: int) -> int:
    """Bytes of rank r's shard of one block, 4 · (6h + (12h² + 7h)/t) when t divides evenly:
    6C replicated (γ, β of 2 LayerNorms, the biases of the 2 row-parallel layers); its slices of
    QKV (C·3q + 3q), the projection (q·C), W₁ (C·f + f) and W₂ (f·C). Gradients hold the same
    bytes (a PARTIAL gradient is whole-shaped)."""
    sizes = shard(cfg, t, r)
    c, q, f = sizes.c, sizes.q, sizes.hidden
    return FLOAT32 * (6 * c + (c * 3 * q + 3 * q) + q * c + (c * f + f) + f * c)


def activation_formula(cfg: dict, t: int, r: int, layer: str) -> int:
    """Bytes the forward's graph keeps on rank r (``held.graph_bytes``): one block as
    ``memory_models.gpt_layer`` counts it in float32 without dropout, beside the block's input
    and output (its sequence shards with SP), which a graph of one block holds too, and the
    causal mask (s² bool bytes). At even splits, with s = T, b = B, h = C, a = heads:
    4 · (sbh · (6 + 16/t) + as²b/t + 2sb) + s² without sequence parallelism,
    4 · (sbh · (2 + 4/t + 16/t) + as²b/t + 2sb/t) + s² with it."""
    sizes = shard(cfg, t, r, layer == "sequence")
    ends = FLOAT32 * 2 * sizes.shard * sizes.c  # the block's input and output
    return gpt_layer(sizes, FLOAT32, FLOAT32, False, "none") + ends + cfg["seq"] ** 2
