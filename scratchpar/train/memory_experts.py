"""A sparse GPT's extra bytes over its dense twin's, for the memory estimate: each sparse block
holds E experts and a router where a dense one holds one MLP, and a step keeps each token's k
experts' activations (``nn/moe.py``)."""

from __future__ import annotations

from typing import NamedTuple


class Sparse(NamedTuple):
    """The sparse blocks of a GPT: ``blocks`` of them, each ``params`` more parameters in
    ``arrays`` more arrays than a dense block, its largest array ``largest`` elements, its
    ``experts`` MLPs ``wide`` = F hidden units each, ``k`` of them a token's."""

    blocks: int
    params: int
    arrays: int
    largest: int
    k: int
    experts: int
    wide: int


def sparse(m) -> Sparse:
    """``cfg.model``'s sparse blocks: every ``moe_every``-th of ``n_layers``, each E MLPs of
    2CF + F + C parameters (8C² + 5C at F = 4C) and a C × E router, where a dense block holds
    one MLP."""
    if m.experts == 0:
        return Sparse(0, 0, 0, 0, 1, 0, m.wide)
    c, e, f = m.d_model, m.experts, m.wide
    return Sparse(m.n_layers // m.moe_every, (e - 1) * (2 * c * f + f + c) + c * e,
                  4 * (e - 1) + 1, c * e, m.top_k, e, f)


def routed_bytes(p: Sparse, nt: int, c: int, e: int, s: int) -> int:
    """What a step keeps of one sparse block beyond its dense twin's, on ``nt`` tokens: the
    k − 1 more assignments' hidden units (3 arrays of F, as the dense MLP's), each
    assignment's gathered input and gated output (2 of C), the router's fp32-or-wider input
    copy, its logits and probabilities, and the routing's index arrays (8 bytes each)."""
    if p.blocks == 0:
        return 0
    wide = max(s, 4)
    return (3 * p.wide * (p.k - 1) * nt + 2 * c * p.k * nt) * e \
        + (c + 3 * p.experts) * nt * wide + 8 * (4 * p.k + 2 * p.experts) * nt
