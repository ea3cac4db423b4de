"""The bytes of what a run builds, from its Config alone: each network (its parameters, a
training step's activations, an evaluation) and each dense data source (its tables, batches)."""

from __future__ import annotations

import os
from typing import NamedTuple

from ..parallel.description import Shape

GiB, MiB = 1 << 30, 1 << 20
I64 = F64 = 8  # token ids and gather indices; the data sources' tables and random draws
# The Python objects the autograd keeps per recorded op until backward ends (its context, the
# output Tensor, the small arrays it saves), beside the arrays counted one by one: tracemalloc
# over chains of recorded ops measures about 400 bytes for an elementwise op on tiny arrays and
# 600-750 for the models' ops. 1 KiB bounds them all.
NODE_BYTES = 1024
CODE_POINTS = 0x110000  # distinct characters a text can hold at most
SCAN_LIMIT = GiB  # a text file up to this size is read (in chunks) to count its characters
HUGE = 1 << 4096  # stands in for a table too large to compute: V**(order+1) with a large order
TEACHER, CALIBRATION = 64, 4096  # SyntheticClassification's hidden width and calibration sample


class Model(NamedTuple):
    """A model's :class:`~scratchpar.parallel.description.Shape` (what the strategies'
    descriptions read), and bytes: the float64 draw that initializes one parameter, a training
    step on rank 0's rows, an evaluation, and the part of the step held once however many
    micro-batches a pipeline stage stashes (cached masks, backward's widest moment)."""

    shape: Shape
    init: int
    step: int
    evaluation: int
    once: int = 0


class Source(NamedTuple):
    """A data source's vocabulary, and bytes: its peak while built (entropy floor included),
    what it keeps, the batches a run holds and draws, and the temporaries of drawing one,
    which are gone before the step that uses it allocates anything (its own moment)."""

    vocab: int
    built: int
    kept: int
    batches: int
    drawing: int = 0


def value_bytes(cfg, s: int) -> int:
    """Bytes of an activation that backward reads: 2 under a 16-bit ``--precision`` (the ops
    save their 16-bit inputs and outputs; the sensitive ones' fp32 lives in their own
    temporaries, which a step's widest moment counts at ``s``), else ``s``."""
    return s if cfg.train.precision == "fp32" else 2


def moments(cfg) -> int:
    """The optimizer's arrays per parameter: Adam's two moments, SGD's momentum, or none."""
    o = cfg.optim
    return 2 if o.optimizer in ("adam", "adamw") else int(o.momentum > 0)


def gpt_block(c: int) -> int:
    """Parameters of one GPT block of width C: Q, K, V and the projection (4C²), the
    feed-forward (8C²), their biases (9C) and two LayerNorms (4C)."""
    return 12 * c * c + 13 * c


def gpt(cfg, s: int, v: int, rows: int) -> Model:
    """The GPT's states and activations; under ``--recompute``, a step keeps of each block its
    input alone (full) or all but its attention core's (B, H, T, T) arrays (selective), and
    backward's widest moment holds one block's, or one core's, graph rebuilt."""
    m, t, recompute = cfg.model, cfg.data.seq_len, cfg.train.recompute
    c, layers, heads, drop = m.d_model, m.n_layers, m.n_heads, int(m.dropout > 0)
    e = value_bytes(cfg, s)
    tied, block = v * c if m.tie_embeddings else 0, gpt_block(c)
    n = 2 * v * c + t * c + layers * block + 2 * c - tied
    largest = max(v * c, t * c, 4 * c * c)
    own = sorted([v * c + t * c - tied, v * c + 2 * c - tied, *[block] * min(layers, 3)])
    shape = Shape(n, s, moments(cfg), largest, 2 + 12 * layers + 2 + (not m.tie_embeddings),
                  layers + 2, own[-1], sum(own[-3:]), tied, t * c * e)
    masks = layers * t * t + 2 * t * t  # each block's cached causal mask, and building one

    def step(b: int) -> int:
        nc, a, nv, nt = b * t * c, b * heads * t * t, b * t * v, b * t  # (N, C), (B, H, T, T)
        # what backward reads (an op's output stays only if an op saved it), per block: two
        # LayerNorms' x̂ and outputs 4, Q, K, V 3, attention·V joined 1, GELU's input, σ and
        # output 12 (N, C) arrays, their 2 rstd (N,), and the softmax's (B, H, T, T); dropout
        # keeps the attention weights' mask (a byte each) and dropped copy, and the MLP's mask;
        # in 16 bits the rstd stay in the run's dtype
        block = 20 * nc * e + 2 * nt * s + a * e + drop * (a * (e + 1) + nc)
        core = a * e + drop * a * (e + 1)  # of it, the attention core's (B, H, T, T) arrays
        blocks, embedded, again = layers * block, drop * nc, 0  # again: rebuilt in backward
        if recompute == "selective":  # the cores keep q, k, v, which QKV keeps anyway
            blocks, again = layers * (block - core), core
        elif recompute == "full":  # each block keeps its input, the embedding its ids
            blocks, embedded, again = layers * nc * e, 0, block
        kept = (blocks + 2 * nc * e + (nt + t * c) * s + embedded  # ln_f; embed's mask
                + 25 * nt)  # targets, rows
        # at its widest: forward's end, the logits beside their softmax (which backward makes
        # the logits' gradient and frees); or in backward, the softmax's two (B, H, T, T)
        # gradients, GELU's three (N, 4C), or in forward the attention dropout's draw (its
        # uint64 positions, their mixed bits and a shifted copy, 24 bytes an entry, beside the
        # masked scores the core still holds), with the residual gradients waiting beside it,
        # and a recomputed part's graph.
        widest = max(2 * nv * s, max(2 * a * s, 12 * nc * s, drop * (24 + s) * a)
                     + 3 * nc * s + again)
        return kept + (40 * layers + 16) * NODE_BYTES, widest

    def evaluation(b: int) -> int:
        nc, a, nv = b * t * c, b * heads * t * t, b * t * v
        return 3 * nc * s + max(2 * a * s + 5 * nc * s, 12 * nc * s, 2 * nv * s + 25 * b * t)

    kept, widest = step(rows)
    return Model(shape, draw(s, largest), masks + kept + widest,
                 masks + evaluation(cfg.train.batch_size), masks + widest)


def recurrent(cfg, s: int, v: int, rows: int) -> Model:
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
    shape = Shape(n, s, moments(cfg), largest, 3 + 3 * m.n_layers, m.n_layers + 2, layer, n,
                  boundary=t * h * s)
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
    return Model(shape, init, kept + widest, evaluation(cfg.train.batch_size), widest)


def mlp(cfg, s: int, rows: int) -> Model:
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
    evaluation = cfg.train.batch_size * (per_row + widest)  # a ReLU's mask beside three arrays
    shape = Shape(sum(layers), s, moments(cfg), largest, 2 * len(pairs), len(pairs), layers[-1],
                  sum(layers[-3:]), boundary=max(sizes[1:]) * e)
    return Model(shape, draw(s, largest), step, evaluation, rows * 3 * widest * s)


def draw(s: int, largest: int) -> int:
    """Initialization draws a weight in float64, then casts it to the model's dtype."""
    return F64 * largest if s != F64 else 0


def dense_source(cfg) -> Source:
    d, b, t = cfg.data, cfg.train.batch_size, cfg.data.seq_len
    if d.source == "classification":
        f, k = d.n_features, d.n_classes
        # the teacher's calibration sample, its hidden layer and two temporaries; its weights
        built = F64 * (CALIBRATION * (f + 3 * TEACHER + k) + TEACHER * (f + k))
        batch = 4 * f + I64  # float32 inputs and int64 labels
        labels = F64 * (f + 2 * TEACHER + 2 * k) + 2 * I64  # the teacher labels in float64
        # a step holds its batch; drawing one computes its labels while the last batch is
        # still held (the evaluation's loop): two batches and the labels' temporaries
        return Source(0, built, F64 * TEACHER * (f + k + 2), b * batch, b * (batch + labels))
    # the step's batch stays alive while evaluation draws one: ids and uniforms, or indices
    batches = b * (3 * I64 * (t + 1) + F64 * t)
    if d.source == "text":
        size = file_size(d.path)
        v = _text_vocab(d.path, size)
        # reading holds the bytes and a str of ≤ 4 bytes per character, then the str and the
        # int32 ids, which stay; a character's index and set entries
        return Source(v, 8 * size + 256 * v, 4 * size + 256 * v, batches)
    v = d.vocab_size
    contexts = _power(v, d.order)
    table = F64 * contexts * v
    # the table and its CDF stay; building them holds three at once, the entropy floor six
    # and four vectors over the contexts; each position of a batch reads rows of the CDF
    return Source(v, 6 * table + 4 * F64 * contexts, 2 * table, batches + b * (F64 + 1) * v)


def _power(base: int, exponent: int) -> int:
    """``base ** exponent``, or HUGE where that would be too large to compute."""
    if exponent * max(base, 1).bit_length() > HUGE.bit_length():
        return HUGE
    return max(base, 0) ** max(exponent, 0)


def file_size(path) -> int:
    try:
        return os.stat(path).st_size if path is not None else 0
    except OSError:  # missing or unreadable: another check reports it
        return 0


def _text_vocab(path, size: int) -> int:
    """PAD plus the distinct characters of a UTF-8 file, read 1 MiB at a time (up to
    SCAN_LIMIT bytes; a larger file may hold any character)."""
    if path is None or not os.path.isfile(path):  # another check reports it
        return 1
    if size > SCAN_LIMIT:
        return CODE_POINTS + 1
    seen: set[str] = set()
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            while chunk := f.read(MiB):
                seen.update(chunk)
    except OSError:  # unreadable: another check reports it
        return 1
    return len(seen) + 1


