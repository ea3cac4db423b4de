"""A GPT block's attention on one rank of a cp group, for the memory estimate: the positions it
holds and the score arrays each scheme keeps (``parallel/context``). On one device (cp = 1) a
block keeps its (B, H, T, T) softmax and caches a (T, T) causal mask."""

from __future__ import annotations

from typing import NamedTuple


class Attention(NamedTuple):
    """Per row of a batch, on one rank: the ``tokens`` it holds, the score entries its
    backward reads (``kept``) and the most a step holds at once (``widest``), the (token, C)
    rows it keeps beyond its own (``gathered``), the elements it keeps in fp32 or wider
    (``wide``), and the bytes of each block's cached mask."""

    tokens: int
    kept: int
    widest: int
    gathered: int
    wide: int
    mask: int


def causal_mask(seq_len: int) -> int:
    """Bytes of the (T, T) bool mask each attention caches (``nn.attention``), a byte an
    entry."""
    return seq_len * seq_len


def attention(t: int, heads: int, c: int, cp: int = 1, scheme: str = "ring") -> Attention:
    """The attention of one block of width ``c`` on a row of ``t`` tokens, ``heads`` heads,
    over ``cp`` ranks by ``scheme``. Ring (Liu et al. 2023, §3): the scores of one (T/cp)² block
    at a time, none kept (backward recomputes them from the log-sum-exp), no cached mask; its
    output (T/cp, C) and log-sum-exp (H, T/cp) kept in fp32 or wider. All-gather: its queries'
    (T/cp, T) scores, and the whole sequence's keys and values. Ulysses: the whole (T, T)
    scores of H/cp heads, and the whole (T, T) mask."""
    if cp == 1:
        return Attention(t, heads * t * t, heads * t * t, 0, 0, causal_mask(t))
    n = t // cp
    if scheme == "ring":
        return Attention(n, 0, heads * n * n, 0, n * c + heads * n, 0)
    if scheme == "allgather":
        return Attention(n, heads * n * t, heads * n * t, 2 * t, 0, n * t)
    return Attention(n, heads * n * t, heads * n * t, 0, 0, t * t)
