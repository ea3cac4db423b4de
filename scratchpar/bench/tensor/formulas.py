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
    with s = T, b = B, h = C, a = heads: 4 · (sbh · (13 + 17/t) + 4·as²b/t + 2sb) + s² without
    sequence parallelism, 4 · (sbh · (4 + 28/t) + 4·as²b/t + 2sb/t) + s² with it.

    This engine keeps every op's output while its graph lives (``ctx.parents``), not only what
    backward reads. Whole (sbh each, or sbh/t with SP): the input; each LayerNorm's x̂ and
    output (2, and rstd: sb); each row-parallel layer's partial product, its sum (a copy) and
    the bias added (3; with SP the partial product stays whole, the other two are shards); the
    2 residual sums. Split (sbh/t): QKV (3), attention·V and its reshaped copy (2; a view, no
    copy, where a rank holds one head), W₁'s output, GELU's σ and its output (12). Scores
    (b, a/t, s, s): QKᵀ, scaled, masked, softmax (4). With SP the all-gathered inputs of QKV and
    W₁ are kept whole (2 sbh). The causal mask: s² bool bytes."""
    b, s, c = cfg["batch"], cfg["seq"], cfg["d_model"]
    heads, f, s_r = shares(cfg, t, r)
    n, q = b * s, heads * (c // cfg["heads"])  # tokens, h_r·d
    copied = heads > 1 and s > 1  # attn·V (B, T, h_r, d) joins its heads by a copy
    split = n * ((4 + copied) * q + 3 * f) + 4 * b * heads * s * s  # QKV, attn·V, W₁ ×3; scores
    if layer == "tensor":
        whole = 13 * n * c + 2 * n
    else:  # 11 shards of (B, T_r, C), the 2 gathered inputs and 2 partial products whole
        whole = 11 * b * s_r * c + 4 * n * c + 2 * b * s_r
    return FLOAT32 * (whole + split) + s * s  # + the (T, T) bool causal mask


def korthikanti(cfg: dict, t: int, layer: str) -> float:
    """Korthikanti et al. 2022, Table 2: a layer's activation bytes per rank in their 16-bit
    accounting (dropout masks 1 B, what backward reads), sbh · (10 + 24/t) + 5as²b/t, or with
    SP sbh · 34/t + 5as²b/t. Beyond it here: outputs no backward reads stay on the graph
    (partial sums, the copies after each sum, the scores before softmax), and with SP the
    gathered inputs are kept rather than gathered again in backward (their §4.2.2)."""
    s, b, h, a = cfg["seq"], cfg["batch"], cfg["d_model"], cfg["heads"]
    whole = 34 / t if layer == "sequence" else 10 + 24 / t
    return s * b * h * whole + 5 * a * s * s * b / t
