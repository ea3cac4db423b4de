"""The bytes of each network a run builds, from its Config alone: one shape function per model
kind (its parameters, a training step's activations, an evaluation), and beside the GPT's the
published count of a transformer layer's activations (Korthikanti et al. 2022). The memory
estimate, the planner and the benchmarks all read these."""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

from ..comm.chunks import counts
from ..parallel.description import LISTED, Shape
from .memory_context import attention
from .memory_experts import routed_bytes, sparse
from .memory_parameters import gpt_arrays, gpt_layers, gpt_parameters

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
I64 = F64 = 8  # token ids and gather indices; the data sources' tables and random draws
# The Python objects the autograd keeps per recorded op until backward ends (its context, the
# output Tensor, the small arrays it saves), beside the arrays counted one by one: tracemalloc
# over chains of recorded ops measures about 400 bytes for an elementwise op on tiny arrays and
# 600-750 for the models' ops. 1 KiB bounds them all.
NODE_BYTES = KiB


class Model(NamedTuple):
    """A model's :class:`~scratchpar.parallel.description.Shape` (what the strategies'
    descriptions read), and bytes: the float64 draw that initializes one parameter, a training
    step on rank 0's rows, an evaluation, and the part of the step held once however many
    micro-batches a pipeline stage stashes (cached masks, backward's widest moment); and the
    ``share`` of its activations one of its tensor-parallel ranks keeps."""

    shape: Shape
    init: int
    step: int
    evaluation: int
    once: int = 0
    share: float = 1

    def held(self, stash: Fraction | int = 1) -> int:
        """A rank's activations at its peak in training: what a step holds once, beside
        ``stash`` times the rest (``Layout.stash``), its tensor-parallel share of those."""
        return int((self.once + (self.step - self.once) * stash) * self.share)


def value_bytes(cfg, s: int) -> int:
    """Bytes of an activation that backward reads: 2 under a 16-bit ``--precision`` (the ops
    save their 16-bit inputs and outputs; the sensitive ones' fp32 lives in their own
    temporaries, which a step's widest moment counts at ``s``), else ``s``."""
    return s if cfg.train.precision == "fp32" else 2


def moments(cfg) -> int:
    """The optimizer's arrays per parameter: Adam's two moments, SGD's momentum, or none."""
    return 2 if cfg.optim.optimizer in ("adam", "adamw") else int(cfg.optim.momentum > 0)


class Sizes(NamedTuple):
    """A GPT block's arrays on one rank: ``n`` = B·T tokens of width ``c`` = C, of which
    ``shard`` are its sequence shard's (n without sequence parallelism); its query width ``q``
    = h_r·d, key/value width ``kv`` = g_r·d (None: q) and ``hidden`` units (C, G·d and F on one
    device, split over t ranks by Megatron, Shoeybi et al. 2019, §3, whole key/value groups to
    a rank), and the entries of its softmax's (B, h_r, T, T) ``scores``."""

    n: float
    c: float
    shard: float
    q: float
    hidden: float
    scores: float
    kv: float | None = None

    @classmethod
    def even(cls, b: int, t: int, c: int, heads: int, tp: int = 1,
             sequence_parallel: bool = False, groups: int | None = None,
             wide: int | None = None) -> Sizes:
        """One of ``tp`` ranks' even share of a block on ``b`` rows of ``t`` tokens, with
        ``groups`` key/value heads (None: ``heads``) and ``wide`` hidden units (None: 4C)."""
        n, g, f = b * t, heads if groups is None else groups, 4 * c if wide is None else wide
        return cls(n, c, n / tp if sequence_parallel else n, c / tp, f / tp,
                   b * heads * t * t / tp, g * (c // heads) / tp)

    @classmethod
    def rank(cls, b: int, t: int, c: int, heads: int, tp: int, r: int,
             sequence_parallel: bool = False, groups: int | None = None,
             wide: int | None = None) -> Sizes:
        """Rank ``r`` of ``tp``'s share of a block on ``b`` rows of ``t`` tokens, split as the
        engine splits it, unevenly where it must (``chunks.counts``): its g_r of the ``groups``
        key/value heads (None: ``heads``) and their h_r = r·g_r query heads, its f_r of the
        ``wide`` (None: 4C) hidden units and, with sequence parallelism, its T_r tokens."""
        g, f, d = heads if groups is None else groups, 4 * c if wide is None else wide, c // heads
        g_r = counts(g, tp)[r]
        h_r = heads // g * g_r
        tokens = b * (counts(t, tp)[r] if sequence_parallel else t)
        return cls(b * t, c, tokens, h_r * d, counts(f, tp)[r], b * h_r * t * t, g_r * d)


def korthikanti(seq: int, batch: int, d_model: int, heads: int, t: int, itemsize: int,
                recompute: str, sequence_parallel: bool) -> float:
    """Bytes one of t tensor-parallel ranks keeps for one layer's backward (Korthikanti et al.
    2022, §4, Table 2), with s = ``seq``, b = ``batch``, h = ``d_model``, a = ``heads``, values
    of e = ``itemsize`` bytes and dropout masks of one byte.

    Per layer they count 16 arrays of (s, b, h) values: 4 whole (the two LayerNorms' inputs
    and outputs) and 12 split over t (Q, K, V; attention·V; GELU's input and output, 4 each);
    2 masks of (s, b, h) whole; and over the attention's (b, a/t, s, s) the softmax's output
    and its dropped copy, e each, and their mask. So, with e = 2, their sbh(34 + 5as/h) at
    t = 1 (eq. 1), sbh(10 + 24/t + 5as/(ht)) with tensor parallelism (eq. 2) and sbh/t · (34 +
    5as/h) with sequence parallelism too (eq. 4):

    - none: sbh(4e + 2 + 12e/t) + (2e + 1)as²b/t, or all of it over t with SP;
    - selective: the attention's term gone (§5, sbh · 34/t with SP at e = 2);
    - full: the layer's input alone, e·sbh (over t with SP: each rank keeps its shard).

    Theirs is multi-head attention with a 4h feed-forward, and so is this count. With G
    key/value heads (Ainslie et al. 2023) and F hidden units, K and V are G/a of theirs and
    GELU's two F/(4h): the 12e split become e(2 + 2G/a + 2F/h), as :func:`gpt_layer` has them.
    """
    e, sbh = itemsize, seq * batch * d_model
    if recompute == "full":
        return e * sbh / (t if sequence_parallel else 1)
    whole, split = (4 * e + 2) * sbh, 12 * e * sbh
    kept = (whole + split) / t if sequence_parallel else whole + split / t
    if recompute == "selective":
        return kept
    return kept + (2 * e + 1) * heads * seq * seq * batch / t


def gpt_layer(sizes: Sizes, e: int, rstd: int, dropout: bool, recompute: str) -> float:
    """Bytes this engine's graph keeps of one GPT block on a rank of ``sizes`` for backward,
    with values of ``e`` bytes and the LayerNorms' rstd of ``rstd``: the arrays
    :func:`korthikanti` counts as backward reads them (an op's output stays only where an op
    saved it, ``autograd.tensor.Context``).

    Whole: each LayerNorm's x̂ (on the shard) and output (4 (N, C) arrays; with sequence
    parallelism the outputs all-gathered, which QKV and W₁ read, while the shards are read by
    none), their 2 rstd of (shard,). Split: QKV's output, whose views Q, K and V the score
    products read (q + 2kv: grouped-query attention's K and V, Ainslie et al. 2023, are G/H
    of multi-head attention's), and attention·V joined, the projection's input (q); W₁'s
    output, GELU's σ beside its input (``autograd.ops_nn``) and its output (3 · F/t); the
    softmax's output (scaling and masking keep nothing; G < H groups its (B, H, T, T) as
    (B, r, G, T, T), as many entries). The row-parallel layers' partial products and sums
    are read by no backward. Dropout keeps the attention weights' mask (a byte an entry) and
    dropped copy, and the MLP output's mask (on the shard: after the reduction). So on one
    device with G = H and F = 4C, at e = 2 with dropout, sbh(41 + 5as/h) and the rstd beside
    the paper's sbh(34 + 5as/h): GELU's σ 8 more, one mask fewer (``nn.Block`` drops out
    after the MLP, not after the attention's projection).

    Recomputed: selective drops the attention core's (B, h_r, T, T) arrays; full keeps the
    block's input alone (its shard with sequence parallelism)."""
    n, c, shard, q = sizes.n, sizes.c, sizes.shard, sizes.q
    if recompute == "full":
        return e * shard * c
    kv = q if sizes.kv is None else sizes.kv
    core = sizes.scores * (e + dropout * (e + 1))
    kept = (e * (2 * shard * c + 2 * n * c + n * (2 * q + 2 * kv + 3 * sizes.hidden))
            + 2 * shard * rstd + dropout * shard * c + core)
    return kept - core if recompute == "selective" else kept


def tensor_share(cfg, tp: int) -> float:
    """The share of a GPT block's activations one of ``tp`` tensor-parallel ranks keeps
    (:func:`gpt_layer` on its even share over one device's), counted as Korthikanti et al. 2022
    (§4.2, eqs. 1-2) count Megatron's: the LayerNorms' (N,) rstd left out, values in the run's
    dtype. Other models keep theirs whole: an exact 1, which keeps a rank's stash exact."""
    if tp == 1 or cfg.model.kind != "gpt":
        return 1
    m, t = cfg.model, cfg.train
    s, drop = 8 if t.dtype == "float64" else 4, m.dropout > 0
    kept = [gpt_layer(Sizes.even(1, cfg.data.seq_len, m.d_model, m.n_heads, ranks,
                                 t.sequence_parallel, m.groups, m.wide), s, 0, drop, "none")
            for ranks in (tp, 1)]
    return kept[0] / kept[1]


def gpt(cfg, s: int, v: int, rows: int, evaluated: int, tp: int) -> Model:
    """The GPT's states and activations, a step on ``rows`` rows and an evaluation on
    ``evaluated``, split over ``tp`` ranks (:func:`tensor_share`); under ``--recompute``, a step
    keeps of each block its input alone (full) or all but its attention core's (B, H, T, T)
    arrays (selective), and backward's widest moment holds one block's, or one core's, graph
    rebuilt. Its blocks' key/value width kv = G·d and feed-forward width F are ``--kv-heads``'
    and ``--d-ff``'s (C and 4C by default)."""
    m, t, recompute = cfg.model, cfg.data.seq_len, cfg.train.recompute
    c, layers, heads, drop = m.d_model, m.n_layers, m.n_heads, int(m.dropout > 0)
    kv, f = m.key_width, m.wide
    e = value_bytes(cfg, s)
    tied = v * c if m.tie_embeddings else 0
    embedding, block, head = gpt_layers(v, t, c, 1, kv=kv, wide=f)  # one block for each
    moe = sparse(m)  # a sparse block holds E experts and a router where a dense one holds one
    n = gpt_parameters(v, t, c, layers, m.tie_embeddings, kv=kv, wide=f) \
        + moe.blocks * moe.params
    largest = max(v * c, t * c, c * (c + 2 * kv), c * f, moe.largest)  # tables, QKV, W₁
    block += moe.params * (moe.blocks > 0)
    own = sorted([embedding - tied, head - tied, *[block] * min(layers, 3)])
    shape = Shape(n, s, moments(cfg), largest, 2 + 12 * layers + 2 + (not m.tie_embeddings)
                  + moe.blocks * moe.arrays, layers + 2, own[-1], sum(own[-3:]), tied, t * c * e,
                  sizes=() if moe.blocks or 12 * layers > LISTED else
                  gpt_arrays(v, t, c, layers, m.tie_embeddings, kv=kv, wide=f))
    core = attention(t, heads, c, cfg.train.cp, cfg.train.cp_attention)  # this rank's tokens
    masks = (layers + 2) * core.mask  # each block's cached one, and building one

    def step(b: int) -> int:  # (N,) tokens, (N, C), (N, V), (B, H, T, T) or a cp rank's part
        nt, nc, nv, a = b * core.tokens, b * core.tokens * c, b * core.tokens * v, b * core.kept
        # what backward reads of each block (gpt_layer; in 16 bits the rstd stay in the run's
        # dtype), and what it rebuilds of a recomputed one: its attention core, or all of it
        sizes = Sizes(nt, c, nt, c, f, a, kv)  # one device's block
        block, held = (gpt_layer(sizes, e, s, drop, mode) for mode in ("none", recompute))
        again = {"none": 0, "selective": block - held, "full": block}[recompute]
        blocks = layers * held
        embedded = drop * nc * (recompute != "full")  # embed's mask; under full, its ids alone
        kept = (blocks + 2 * nc * e + (nt + t * c) * s + embedded  # ln_f; embed's mask
                + 25 * nt + layers * b * (core.gathered * kv * e + core.wide * s)  # cp's
                + moe.blocks * routed_bytes(moe, nt, c, e, s))  # the experts' k assignments
        # at its widest: forward's end, the logits beside their softmax (which backward makes
        # the logits' gradient and frees); or in backward, the softmax's two (B, H, T, T)
        # gradients, GELU's three (N, F), or in forward the attention dropout's draw (its
        # uint64 positions, their mixed bits and a shifted copy, 24 bytes an entry, beside the
        # masked scores the core still holds), with the residual gradients waiting beside it,
        # and a recomputed part's graph.
        widest = max(2 * nv * s, max(2 * b * core.widest * s, 3 * nt * f * s,
                                     drop * (24 + s) * a) + 3 * nc * s + again)
        return kept + (40 * layers + 16) * NODE_BYTES, widest

    def evaluation(b: int) -> int:  # in the training layout: a cp rank's positions
        nt, a = b * core.tokens, b * core.widest
        nc, nv = nt * c, nt * v  # beside the scores QKV's (N, C + 2kv); GELU's three (N, F)
        return 3 * nc * s + max(2 * a * s + nt * (3 * c + 2 * kv) * s, 3 * nt * f * s,
                                2 * nv * s + 25 * nt)

    kept, widest = step(rows)
    return Model(shape, draw(s, largest), masks + kept + widest, masks + evaluation(evaluated),
                 masks + widest, tensor_share(cfg, tp))


def recurrent(cfg, s: int, v: int, rows: int, evaluated: int) -> Model:
    m, t = cfg.model, cfg.data.seq_len
    lstm = m.kind == "lstm"
    e, h, g = m.d_model, m.d_hidden, 4 if lstm else 1
    per_step = 7 if lstm else 1  # (B, H) arrays a time step keeps: 4 gates, c, tanh c, h
    ops = 16 if lstm else 5  # ops a time step records
    extra = m.n_layers - 1  # stacked layers after the first: h inputs, and their own states
    first, stacked = (e + 1) * g * h + h * g * h, (h + 1) * g * h + h * g * h
    n = v * e + first + (h + 1) * v + extra * stacked
    largest = max(v * e, e * g * h, h * g * h, h * v)
    layer = max(v * e, first, stacked if extra else 0, (h + 1) * v)
    # backward runs through every layer's time steps together: ZeRO-3 holds them all gathered
    arrays = () if 3 * extra > LISTED else (v * e, e * g * h, g * h, h * g * h,  # the table;
        *(h * g * h, g * h, h * g * h) * extra, h * v, v)  # each layer's W_x, b, W_h; the head
    shape = Shape(n, s, moments(cfg), largest, 3 + 3 * m.n_layers, m.n_layers + 2, layer, n,
                  boundary=t * h * s, sizes=arrays)
    init = max(draw(s, largest), F64 * (2 * g + 4) * h * h)  # orthogonal blocks: QR, concat

    def step(b: int) -> int:
        nt = b * t
        kept = (nt * (e + h) * s + t * per_step * b * h * s + 25 * nt  # embed, h; steps; ids
                + extra * (nt * h + t * per_step * b * h) * s)
        # at its widest: forward's end, the logits beside their softmax; a layer's forward,
        # x·W_x beside its steps; backward's one (B, T, G·H) buffer that every step's slice of
        # x·W_x is added into (autograd/sums.py), with the step's own arrays and W_h's
        # gradient sum, and the (B, T, H) gradient of the stacked states beside it; or the
        # embedding's int64 indices.
        widest = max(2 * nt * v * s, (nt + 10 * b + 2 * h) * g * h * s + nt * h * s,
                     8 * nt * e + nt * (e + g * h) * s)
        return kept + (ops * t * m.n_layers + 10) * NODE_BYTES, widest

    def evaluation(b: int) -> int:
        nt = b * t  # x·W_x, every step's state and their stack, a step's arrays; then logits
        states = (nt * (g * h + 2 * h) * m.n_layers + 10 * b * g * h) * s
        return states + max(nt * e * s, 2 * nt * v * s + 25 * nt)

    kept, widest = step(rows)
    return Model(shape, init, kept + widest, evaluation(evaluated), widest)


def mlp(cfg, s: int, rows: int, evaluated: int) -> Model:
    d, hidden = cfg.data, cfg.model.hidden_sizes
    sizes = [d.n_features, *hidden, d.n_classes]
    pairs = list(zip(sizes[:-1], sizes[1:]))
    layers = sorted(i * o + o for i, o in pairs)
    largest = max(i * o for i, o in pairs)
    widest, k, e = max(sizes[1:]), d.n_classes, value_bytes(cfg, s)
    cast = F64 * d.n_features * (s == 8)  # float32 inputs meet float64 weights: NumPy casts them
    per_row = 2 * k * s + 25 + cast + 3 * widest * s  # logits, softmax, labels; the widest three
    # each hidden layer keeps what backward reads: its ReLU's mask (a byte) and output, the
    # next layer's input
    step = rows * (per_row + sum(hidden) * (e + 1)) + (2 * len(pairs) + 4) * NODE_BYTES
    evaluation = evaluated * (per_row + widest)  # a ReLU's mask beside three arrays
    shape = Shape(sum(layers), s, moments(cfg), largest, 2 * len(pairs), len(pairs), layers[-1],
                  sum(layers[-3:]), boundary=max(sizes[1:]) * e,
                  sizes=tuple(n for i, o in pairs for n in (i * o, o)))  # each W, then its b
    return Model(shape, draw(s, largest), step, evaluation, rows * 3 * widest * s)


def draw(s: int, largest: int) -> int:
    """Initialization draws a weight in float64, then casts it to the model's dtype."""
    return F64 * largest if s != F64 else 0
