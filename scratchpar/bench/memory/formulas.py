"""A transformer layer's activation bytes per rank as Korthikanti et al. 2022 count them, in any
precision and under each recomputation."""

from __future__ import annotations


def korthikanti(seq: int, batch: int, d_model: int, heads: int, t: int, itemsize: int,
                recompute: str, sequence_parallel: bool) -> float:
    """Bytes one of t tensor-parallel ranks keeps for one layer's backward (Korthikanti et al.
    2022, §4, Table 2), with s = ``seq``, b = ``batch``, h = ``d_model``, a = ``heads``, values
    of e = ``itemsize`` bytes and dropout masks of one byte.

    Per layer they count 16 arrays of (s, b, h) values: 4 whole (the two LayerNorms' inputs
    and outputs) and 12 split over t (Q, K, V; attention·V; GELU's input and output, 4 each);
    2 masks of (s, b, h) whole; and over the attention's (b, a/t, s, s) the softmax's output
    and its dropped copy, e each, and their mask. So, with e = 2, their sbh(34 + 5as/h) at
    t = 1, sbh(10 + 24/t + 5as/(ht)) with tensor parallelism (eq. 2) and sbh/t · (34 +
    5as/h) with sequence parallelism too (eq. 4):

    - none: sbh(4e + 2 + 12e/t) + (2e + 1)as²b/t, or all of it over t with SP;
    - selective: the attention's term gone (§5, sbh · 34/t with SP at e = 2);
    - full: the layer's input alone, e·sbh (over t with SP: each rank keeps its shard).
    """
    e, sbh = itemsize, seq * batch * d_model
    if recompute == "full":
        return e * sbh / (t if sequence_parallel else 1)
    whole, split = (4 * e + 2) * sbh, 12 * e * sbh
    kept = (whole + split) / t if sequence_parallel else whole + split / t
    if recompute == "selective":
        return kept
    return kept + (2 * e + 1) * heads * seq * seq * batch / t


def engine(seq: int, batch: int, d_model: int, heads: int, t: int, itemsize: int,
           recompute: str, sequence_parallel: bool) -> float:
    """The same layer as this engine's graph keeps it (``autograd.held.graph_bytes``): what
    :func:`korthikanti` counts, less one mask of (s, b, h) (``nn.Block`` drops out after the
    MLP, not after the attention's projection), plus GELU's σ beside its input (4 more split
    arrays: ``autograd.ops_nn``), the LayerNorms' two fp32 rstd of (s, b), and the causal mask
    (s² bools) where the attention core is kept. With SP the two all-gathered LayerNorm
    outputs are kept whole, not gathered again in backward as their §4.2.2 does."""
    if recompute == "full":
        return korthikanti(seq, batch, d_model, heads, t, itemsize, recompute,
                           sequence_parallel)
    e, sbh, sb = itemsize, seq * batch * d_model, seq * batch
    shard = t if sequence_parallel else 1
    extra = 4 * e * sbh / t - sbh / shard + 2 * 4 * sb / shard
    if sequence_parallel:
        extra += 2 * e * sbh * (1 - 1 / t)  # QKV's and W₁'s inputs, gathered whole
    if recompute == "none":
        extra += seq * seq
    return korthikanti(seq, batch, d_model, heads, t, itemsize, recompute,
                       sequence_parallel) + extra
