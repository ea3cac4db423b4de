"""A teacher-labelled Gaussian classification task that an MLP can learn, with known floor."""

from __future__ import annotations

import math

import numpy as np

from scratchpar.backend import rng
from scratchpar.data.checks import check_int, check_rows, check_step, cut
from scratchpar.data.fresh import Fresh

TEACHER_WIDTH = 64
CALIBRATION_SIZE = 4096
_TEACHER_STREAM = 1
_BATCH_STREAM = 2


class SyntheticClassification(Fresh):
    """Inputs ``x ~ N(0, I)`` in float32 ``(b, n_features)``, labels int64 ``(b,)``.

    A fixed random one-hidden-layer teacher labels each input: ``label(x) = argmax(tanh(x W1 + c1)
    W2 + c2)`` with ``W1 ~ N(0, 1/n_features)``, ``c1 ~ N(0, 1/4)``, ``W2 ~ N(0, 1/TEACHER_WIDTH)``,
    so the labels are a smooth nonlinear function of ``x`` that an MLP can fit. ``c2`` subtracts
    the mean logits over a calibration sample, which keeps the classes roughly balanced. With
    ``noise = ε`` each label is replaced, with probability ``ε``, by a uniformly random class
    (possibly the same one). ``batch(step, b)`` is a pure function of ``(seed, step)``.
    """

    def __init__(
        self, n_features: int = 784, n_classes: int = 10, seed: int = 0, noise: float = 0.0
    ):
        self.n_features = check_int("n_features", n_features, 1)
        self.n_classes = check_int("n_classes", n_classes, 2)
        self.seed = check_int("seed", seed, 0)
        if not isinstance(noise, (int, float, np.integer, np.floating)) or not 0 <= noise <= 1:
            raise ValueError(f"noise must be a probability in [0, 1], got {noise!r}")
        self.noise = float(noise)
        g = rng(self.seed, _TEACHER_STREAM)
        D, H, K = self.n_features, TEACHER_WIDTH, self.n_classes
        self.w1 = g.normal(0.0, 1.0 / math.sqrt(D), size=(D, H))  # (D, H)
        self.c1 = g.normal(0.0, 0.5, size=H)  # (H,)
        self.w2 = g.normal(0.0, 1.0 / math.sqrt(H), size=(H, K))  # (H, K)
        calibration = g.standard_normal((CALIBRATION_SIZE, D))  # (N, D)
        self.c2 = -(np.tanh(calibration @ self.w1 + self.c1) @ self.w2).mean(axis=0)  # (K,)

    def _logits(self, x: np.ndarray) -> np.ndarray:
        hidden = np.tanh(np.asarray(x, dtype=np.float64) @ self.w1 + self.c1)  # (b, H)
        return hidden @ self.w2 + self.c2  # (b, K)

    def label(self, x: np.ndarray) -> np.ndarray:
        """The teacher's noiseless labels of ``x`` ``(b, n_features)``: int64 ``(b,)``."""
        return np.argmax(self._logits(x), axis=1).astype(np.int64)  # (b,)

    def batch(self, step: int, batch_size: int, rows=None) -> tuple[np.ndarray, np.ndarray]:
        """Batch ``step``: ``x`` float32 ``(b, n_features)`` and ``y`` int64 ``(b,)``.

        Inputs and label noise are drawn from one generator seeded by ``(seed, step)``, so any
        batch can be regenerated without state. ``rows = (start, stop)`` cuts those rows from
        the whole: a normal draw takes a varying count of the generator's outputs (ziggurat),
        so where a row's draws begin is not known without drawing the rows before it.
        """
        step, batch_size = check_step(step, batch_size)
        first, stop = check_rows(rows, batch_size)
        g = rng(self.seed, _BATCH_STREAM, step)
        x = g.standard_normal((batch_size, self.n_features), dtype=np.float32)  # (B, D)
        flip = g.random(batch_size) < self.noise  # (B,)
        random_class = g.integers(0, self.n_classes, size=batch_size)  # (B,)
        y = np.where(flip, random_class, self.label(x)).astype(np.int64)  # (B,)
        return cut((x, y), first, stop, batch_size)

    def bayes_risk(self) -> float:
        """The exact Bayes cross-entropy in nats per example.

        The true posterior is ``1 - ε + ε/K`` on the teacher's class and ``ε/K`` on each other,
        whatever ``x``, so the floor is ``-(1-ε+ε/K) log(1-ε+ε/K) - (K-1)(ε/K) log(ε/K)``
        (``0`` for noiseless labels).
        """
        K, eps = self.n_classes, self.noise
        probs = [1.0 - eps + eps / K] + [eps / K] * (K - 1)
        return float(-sum(p * math.log(p) for p in probs if p > 0)) + 0.0  # −0.0 → 0.0
