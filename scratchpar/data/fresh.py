"""Sources that draw every batch afresh from their generator: a held-out batch is one that no
training step draws, so it is held out by construction."""

from __future__ import annotations

EVAL_OFFSET = 2**40  # held-out batch i is batch EVAL_OFFSET + i: a step no training run reaches


class Fresh:
    """A source whose ``batch(step, b)`` draws new samples for every step (the synthetic
    language, classification, the sparse problems): held-out batch ``i`` is the batch of a
    step past any run, never seen in training. A text, which has only the samples of its file,
    holds out a part of it instead (``data/text.py``)."""

    def held_out(self, i: int, batch_size: int):
        """Held-out batch ``i`` of ``batch_size``: the batch of step ``EVAL_OFFSET + i``."""
        return self.batch(EVAL_OFFSET + i, batch_size)
