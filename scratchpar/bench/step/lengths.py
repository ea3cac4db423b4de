"""A recurrent model's step against its sequence length: a step over T time steps does T
steps' work, so its cost per token should not grow with T. The LSTM language model (batch 32,
hidden 128) trains at each length, and each row is the median step over its tokens."""

from __future__ import annotations

import numpy as np

from ... import nn
from ...backend import to_device
from ..timing import Timed, interleaved
from .cases import contender, sgd_update

BATCH, EMBED, HIDDEN, VOCAB = 32, 64, 128, 64
FLAT = 1.2  # the target: per-token cost at the longest length ≤ this × the shortest's


def lstm_step(length: int, seed: int = 0) -> Timed:
    """One SGD step of the LSTM language model on a batch of ``length`` tokens a row."""
    gen = np.random.default_rng(seed)
    model = nn.LSTMLanguageModel(VOCAB, EMBED, HIDDEN, gen)
    batch = to_device(gen.integers(1, VOCAB, (BATCH, length + 1)))  # (B, T+1)
    params = model.parameters()
    return contender("lstm", model, lambda: nn.lm_loss(model, batch), dict,
                     lambda: sgd_update(params)).step


def per_token(lengths: list[int], repeats: int, warmup: int) -> list[dict]:
    """Per length: the median step's ms and its µs per token (B·T), the lengths in turns."""
    steps = interleaved({n: lstm_step(n) for n in lengths}, repeats, warmup)
    ms = {n: 1e3 * float(np.median(steps[n])) for n in lengths}
    return [{"length": n, "ms": ms[n], "us_per_token": 1e3 * ms[n] / (BATCH * n)}
            for n in lengths]


def flatness(rows: list[dict]) -> float:
    """The longest length's cost per token over the shortest's (1: flat, linear in T)."""
    return rows[-1]["us_per_token"] / rows[0]["us_per_token"]
