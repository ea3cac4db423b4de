"""What a rank of a tensor-parallel block holds and sends, in bytes, as this engine counts it."""

from __future__ import annotations

from ...comm.chunks import counts

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
    """Bytes the forward's graph keeps on rank r (``held.graph_bytes``, the input included),
    with s = T, b = B, h = C, a = heads: 4 · (sbh · (6 + 16/t) + as²b/t + 2sb) + s² without
    sequence parallelism, 4 · (sbh · (2 + 4/t + 16/t) + as²b/t + 2sb/t) + s² with it.

    The graph keeps what backward reads: an op's output stays only where an op saved it
    (``autograd.tensor.Context``). Whole (sbh each, or sbh/t with SP): the input; each
    LayerNorm's x̂ and output, the next layer's input (2, and rstd: sb); the block's output.
    Split (sbh/t): Q, K and V, which the score products read (3); attention·V joined, the
    projection's input (1); W₁'s output, GELU's σ and its output (12). Scores (b, a/t, s, s):
    the softmax's output only, since scaling and masking keep nothing. The row-parallel
    layers' partial products and sums are read by no backward. With SP each LayerNorm's output
    is all-gathered and the whole gathered input is what QKV and W₁ keep (2 sbh), while the
    shard itself is read by none. The causal mask: s² bool bytes."""
    b, s, c = cfg["batch"], cfg["seq"], cfg["d_model"]
    heads, f, s_r = shares(cfg, t, r)
    n, q = b * s, heads * (c // cfg["heads"])  # tokens, h_r·d
    split = n * (4 * q + 3 * f) + b * heads * s * s  # QKV, attn·V, W₁ ×3; scores
    if layer == "tensor":
        whole = 6 * n * c + 2 * n
    else:  # 4 shards of (B, T_r, C), the 2 gathered inputs whole
        whole = 4 * b * s_r * c + 2 * n * c + 2 * b * s_r
    return FLOAT32 * (whole + split) + s * s  # + the (T, T) bool causal mask


def korthikanti(cfg: dict, t: int, layer: str) -> float:
    """Korthikanti et al. 2022, Table 2: a layer's activation bytes per rank in their 16-bit
    accounting (dropout masks 1 B, what backward reads), sbh · (10 + 24/t) + 5as²b/t, or with
    SP sbh · 34/t + 5as²b/t. Here float32 doubles every array's bytes, GELU keeps its σ beside
    its input, there is no dropout, and with SP the gathered inputs are kept rather than
    gathered again in backward (their §4.2.2)."""
    s, b, h, a = cfg["seq"], cfg["batch"], cfg["d_model"], cfg["heads"]
    whole = 34 / t if layer == "sequence" else 10 + 24 / t
    return s * b * h * whole + 5 * a * s * s * b / t
