"""Sparse logistic regression on RCV1-like features (a few hot, many rare), with its Bayes floor."""

from __future__ import annotations

import math

import numpy as np

from scratchpar.backend import rng
from scratchpar.data.checks import check_int, check_rows, check_step, cut
from scratchpar.data.fresh import Fresh

EXPONENT = 1.0  # Zipf's law: feature j is drawn with probability ∝ (j + 1)^−EXPONENT
WEIGHT_SCALE = 3.0  # w*_j ~ N(0, 3²): a unit-norm sample's logit x·w* has standard deviation 3
CALIBRATION_ENTRIES = 2**19  # non-zeros in the fixed sample that estimates the floor
CHUNK_ENTRIES = 2**13  # non-zeros drawn at once while estimating it
_TRUTH_STREAM = 1
_BATCH_STREAM = 2
_CALIBRATION_STREAM = 3


class SparseLogistic(Fresh):
    """Samples of ``nnz`` distinct features out of ``n_features``, labelled by a true logistic
    model: a batch is ``idx`` int64 ``(b, nnz)`` (ascending in each row), ``val`` float32
    ``(b, nnz)`` and ``y`` int64 ``(b,)`` in {0, 1}. Every sample has the same number of
    non-zeros, so a batch is a CSR matrix without its row pointers.

    Features follow Zipf's law, as the terms of a text collection do (RCV1, Lewis et al. 2004):
    feature j is drawn with probability ``p_j ∝ (j + 1)^−EXPONENT``, so the low ids are hot
    (at the defaults feature 0 is in most samples) and the high ids rare. A sample draws
    features i.i.d. from ``p`` and keeps the first ``nnz`` distinct ones: successive sampling,
    the same law as drawing without replacement one at a time, each draw ∝ ``p`` over the
    features not drawn yet. Its values are RCV1-v2's "ltc" tf-idf weights: ``(1 + ln k)·idf_j``
    with a term count ``k ~ Geometric(½)`` and ``idf_j = ln(1 + 1/(nnz·p_j))`` (about ln of the
    inverse share of samples holding j), scaled to unit L2 norm per sample.

    The truth is dense: ``w*_j ~ N(0, WEIGHT_SCALE²)`` for every feature and ``b* ~ N(0, 1)``,
    and ``y ~ Bernoulli(σ(x·w* + b*))`` for the float32 values ``x`` the batch holds. So a
    logistic regression can represent the truth, and the rare features are the hard part.
    ``batch(step, b)`` is a pure function of ``(seed, step)``.
    """

    def __init__(self, n_features: int = 784, nnz: int = 8, seed: int = 0):
        self.n_features = check_int("n_features", n_features, 2)
        self.nnz = check_int("nnz", nnz, 1)
        self.seed = check_int("seed", seed, 0)
        if 2 * self.nnz > self.n_features:
            raise ValueError(f"nnz must be at most n_features / 2 (sparse samples), got nnz "
                             f"{self.nnz} of {self.n_features}")
        p = np.arange(1, self.n_features + 1, dtype=np.float64) ** -EXPONENT  # (D,)
        self.popularity = p / p.sum()  # (D,) Zipf's law
        cdf = np.cumsum(self.popularity)  # (D,)
        self._cdf = cdf / cdf[-1]  # last entry exactly 1: every uniform in [0, 1) finds a feature
        self.idf = np.log1p(1.0 / (self.nnz * self.popularity))  # (D,) ln(1 + 1/doc frequency)
        g = rng(self.seed, _TRUTH_STREAM)
        self.weight = g.normal(0.0, WEIGHT_SCALE, size=self.n_features)  # (D,) w*
        self.bias = float(g.normal())  # b*
        self._floor = None
        self.floor_stderr = None  # the floor estimate's standard error, once it is computed

    def batch(self, step: int, batch_size: int,
              rows=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Batch ``step``: ``idx`` int64 ``(b, nnz)``, ``val`` float32 ``(b, nnz)``, ``y`` int64
        ``(b,)``, all drawn from one generator seeded by ``(seed, step)``; ``rows = (start,
        stop)`` cuts those rows from the whole (the features' draws are rejection-sampled)."""
        step, batch_size = check_step(step, batch_size)
        first, stop = check_rows(rows, batch_size)
        g = rng(self.seed, _BATCH_STREAM, step)
        idx, val = self._features(g, batch_size)  # (B, nnz), (B, nnz)
        y = (g.random(batch_size) < self.probability(idx, val)).astype(np.int64)  # (B,)
        return cut((idx, val, y), first, stop, batch_size)

    def logit(self, idx: np.ndarray, val: np.ndarray) -> np.ndarray:
        """The true model's logits ``x·w* + b*`` (float64 ``(b,)``) of samples ``(idx, val)``."""
        return np.einsum("bk,bk->b", val.astype(np.float64), self.weight[idx]) + self.bias

    def probability(self, idx: np.ndarray, val: np.ndarray) -> np.ndarray:
        """``P(y = 1 | x) = σ(x·w* + b*)``, float64 ``(b,)``."""
        return 0.5 * (np.tanh(0.5 * self.logit(idx, val)) + 1.0)  # σ, stable for large |z|

    def _features(self, g: np.random.Generator, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """``rows`` samples: ascending distinct ids ``(rows, nnz)`` and their float32 values."""
        n = self.nnz
        draws = np.empty((rows, 0), dtype=np.int64)  # (rows, M) i.i.d. features, in draw order
        while True:
            more = np.searchsorted(self._cdf, g.random((rows, 2 * n)), side="right")  # (rows, 2n)
            draws = np.concatenate([draws, more], axis=1)  # (rows, M)
            first = first_occurrences(draws)  # (rows, M)
            if (first.sum(axis=1) >= n).all():
                break
        keep = np.argsort(~first, axis=1, kind="stable")[:, :n]  # (rows, nnz) first n distinct
        idx = np.sort(np.take_along_axis(draws, keep, axis=1), axis=1)  # (rows, nnz)
        tf = 1.0 + np.log(g.geometric(0.5, size=(rows, n)))  # (rows, nnz) 1 + ln(term count)
        raw = tf * self.idf[idx]  # (rows, nnz) tf-idf
        val = raw / np.linalg.norm(raw, axis=1, keepdims=True)  # (rows, nnz) cosine normalized
        return idx, val.astype(np.float32)

    def bayes_risk(self) -> float:
        """The Bayes risk in nats per sample: ``E_x[H(σ(x·w* + b*))]``, the expected log-loss
        of the true model, which no model beats in expectation.

        It has no closed form, so it is estimated once on a fixed sample of
        ``CALIBRATION_ENTRIES // nnz`` samples (at least 1024) drawn as batches are, from a
        stream of its own. Taking the exact entropy of each sample's label, rather than the
        log-loss of a drawn label, leaves only the spread over ``x``: the standard error,
        ``floor_stderr``, is about 1e-3 nats at the defaults (65,536 samples), more where a large
        ``nnz`` leaves fewer samples.
        """
        if self._floor is None:
            self._floor, self.floor_stderr = self._estimate()
        return self._floor

    def _estimate(self) -> tuple[float, float]:
        g = rng(self.seed, _CALIBRATION_STREAM)
        rows = max(CALIBRATION_ENTRIES // self.nnz, 1024)
        chunk = max(CHUNK_ENTRIES // self.nnz, 1)
        total = squares = 0.0
        for start in range(0, rows, chunk):
            z = self.logit(*self._features(g, min(chunk, rows - start)))  # (c,)
            h = bernoulli_entropy(z)  # (c,)
            total += h.sum()
            squares += (h * h).sum()
        mean = total / rows
        return float(mean), math.sqrt(max(squares / rows - mean * mean, 0.0) / rows)


def first_occurrences(draws: np.ndarray) -> np.ndarray:
    """Bool ``(rows, M)``: where each row of ``draws`` holds a value for the first time."""
    order = np.argsort(draws, axis=1, kind="stable")  # (rows, M) equal values keep draw order
    ranked = np.take_along_axis(draws, order, axis=1)  # (rows, M)
    new = np.ones(ranked.shape, dtype=bool)  # (rows, M)
    new[:, 1:] = ranked[:, 1:] != ranked[:, :-1]
    first = np.empty_like(new)
    np.put_along_axis(first, order, new, axis=1)
    return first


def bernoulli_entropy(z: np.ndarray) -> np.ndarray:
    """``H(σ(z))`` in nats, stable for any ``z``: ``σ(z)·softplus(−z) + σ(−z)·softplus(z)``."""
    p = 0.5 * (np.tanh(0.5 * z) + 1.0)  # σ(z)
    return p * np.logaddexp(0.0, -z) + (1.0 - p) * np.logaddexp(0.0, z)
