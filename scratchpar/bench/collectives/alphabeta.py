"""The α-β cost model of an all-reduce: bandwidth conventions and a least-squares fit of α and β."""

from __future__ import annotations

import numpy as np


def algbw(nbytes: float, seconds: float) -> float:
    """Algorithmic bandwidth in bytes/s: the buffer's size over the time the all-reduce took."""
    return nbytes / seconds


def busbw(nbytes: float, seconds: float, p: int) -> float:
    """Bus bandwidth: algbw·2(p−1)/p, what each link carries in an optimal all-reduce
    (NCCL's convention, nccl-tests doc/PERFORMANCE.md), comparable across world sizes."""
    return algbw(nbytes, seconds) * 2 * (p - 1) / p


def ring_terms(nbytes: float, p: int) -> tuple[float, float]:
    """(messages, bytes) of a ring all-reduce: t = 2(p−1)·α + 2(p−1)/p·N·β
    (Patarasuk & Yuan 2009, reduce-scatter then all-gather)."""
    return 2 * (p - 1), 2 * (p - 1) / p * nbytes


def doubling_terms(nbytes: float, p: int) -> tuple[float, float]:
    """(messages, bytes) of recursive doubling: t = ⌈log₂p⌉(α + N·β) for p a power of two; other p
    add a fold and an unfold of the whole buffer (Thakur, Rabenseifner & Gropp 2005, §4.1)."""
    steps = (p.bit_length() - 1) + (0 if p & (p - 1) == 0 else 2)
    return steps, steps * nbytes


def fit(terms: list[tuple[float, float]], seconds: list[float]) -> dict:
    """α and β minimising the *relative* residuals of t = m·α + b·β over the measurements: a
    message of n bytes costs α + n·β (Hockney 1994), α the latency per message, β the seconds
    per byte; an algorithm that sends m messages one after another, b bytes in all on each
    rank's critical path, takes m·α + b·β, its local reductions folded into β.

    Relative, so that a 4 KiB message weighs as much as a 64 MiB one: ordinary least squares on
    seconds would let the largest sizes decide α too. Returns α, β and the rms relative residual.
    """
    a = np.array(terms, dtype=np.float64)  # (S, 2): messages, bytes
    t = np.array(seconds, dtype=np.float64)  # (S,)
    (alpha, beta), *_ = np.linalg.lstsq(a / t[:, None], np.ones_like(t), rcond=None)
    residual = (a @ [alpha, beta] - t) / t  # (S,)
    return {"alpha_s": float(alpha), "beta_s_per_byte": float(beta),
            "rms_rel_residual": float(np.sqrt(np.mean(residual ** 2)))}
