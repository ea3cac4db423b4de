"""A pipeline's virtual stages from the config alone, for a machine that is not here: each
layer's parameters, by which the engine cuts the stages (``partition.parameter_counts``), and
its FLOP (``flops.py``), by which the roofline prices them.

A GPT's embedding and head hold V·C parameters each and almost no products, a block 12C² and
24TC²: cut by parameters, the stages that hold an end hold fewer blocks, and the pipeline's pace
is set by the others, not by 1/P of the work.
"""

from __future__ import annotations

import functools

from ..parallel.pipeline.partition import partition
from ..train.memory_parameters import gpt_layers
from . import flops


def parameters(cfg, vocab: int) -> list[int]:
    """Parameters of each pipeline layer, counted as ``partition.parameter_counts`` counts the
    built model: a tied embedding in both layers that hold it."""
    m, d = cfg.model, cfg.data
    if m.kind == "gpt":
        return gpt_layers(vocab, d.seq_len, m.d_model, m.n_layers, kv=m.key_width,
                          wide=m.wide)
    if m.kind in ("lstm", "rnn"):
        e, h, g = m.d_model, m.d_hidden, 4 if m.kind == "lstm" else 1
        cells = [(inputs + 1) * g * h + h * g * h for inputs in [e] + [h] * (m.n_layers - 1)]
        return [vocab * e, *cells, (h + 1) * vocab]
    sizes = [d.n_features, *m.hidden_sizes, d.n_classes]
    return [i * o + o for i, o in zip(sizes, sizes[1:])]


def flop_shares(cfg, vocab: int):
    """``shares(rows, P)``: each of P virtual stages' share of the model's forward and backward
    FLOP, the stages cut as the engine cuts them (``--balance``: by parameters, or by time,
    which FLOP stands in for)."""
    work = flops.layers(cfg, vocab)
    whole = flops.total(work)
    weights = ([w.step for w in work] if cfg.train.balance == "time"
               else parameters(cfg, vocab))

    def shares(rows: int, stages: int) -> list[tuple[float, float]]:
        return [(sum(work[i].forward for i in cut) / whole.forward,
                 sum(work[i].backward for i in cut) / whole.backward)
                for cut in cuts(tuple(weights), stages)]

    return shares


@functools.lru_cache(maxsize=256)
def cuts(weights: tuple[int, ...], stages: int) -> list:
    """``partition``'s cut, kept: every layout of a plan with the same model and stages asks
    for the same one, and the linear partition costs O(P·n²)."""
    return partition(list(weights), stages)


def weight_share(cfg, vocab: int) -> float:
    """The weights' gradients' share of the backward's FLOP: what a zero-bubble schedule's W
    takes out of B (Qi et al. 2023, §2), on every stage alike."""
    whole = flops.total(flops.layers(cfg, vocab))
    return whole.weight / whole.backward
