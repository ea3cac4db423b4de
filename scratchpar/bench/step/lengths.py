"""A recurrent model's step against its sequence length: its cost per token should stay flat."""

from __future__ import annotations

import numpy as np

from ... import nn
from ...backend import to_device
from ..timing import interleaved
from .cases import ours

BATCH, EMBED, HIDDEN, VOCAB = 32, 64, 128, 64
FLAT = 1.2  # the target: per-token cost at the longest length ≤ this × the shortest's


def per_token(lengths: list[int], repeats: int, warmup: int) -> list[dict]:
    """Per length T: the median SGD step's ms of the LSTM language model on a batch of T tokens
    a row, and its µs per token (B·T), the lengths timed in turns."""
    steps = {}
    for n in lengths:
        gen = np.random.default_rng(0)
        model = nn.LSTMLanguageModel(VOCAB, EMBED, HIDDEN, gen)
        batch = to_device(gen.integers(1, VOCAB, (BATCH, n + 1)))  # (B, T+1)
        steps[n] = ours(model, lambda model=model, batch=batch: nn.lm_loss(model, batch)).step
    ms = {n: 1e3 * float(np.median(s)) for n, s in interleaved(steps, repeats, warmup).items()}
    return [{"length": n, "ms": ms[n], "us_per_token": 1e3 * ms[n] / (BATCH * n)}
            for n in lengths]
