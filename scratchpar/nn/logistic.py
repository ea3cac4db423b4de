"""Logistic regression on sparse features: each sample reads only the weights of its features."""

from __future__ import annotations

import numpy as np

from ..backend import get_array_module
from . import init
from .module import Module, Parameter


class SparseLogisticRegression(Module):
    """(idx (B, nnz) int, val (B, nnz)) → logits (B,): z = Σ_k w[idx_k]·val_k + b.

    A sample is its ``nnz`` non-zero features (ids and values). The forward gathers those
    weights (``w[idx]``, whose backward scatter-adds into the touched entries alone) instead
    of multiplying a dense (B, n_features) matrix. ``weight`` (n_features,) starts Xavier-normal
    with fan-in n_features, ``bias`` (1,) at 0. Its loss is the binary cross-entropy of the
    logits (``F.binary_cross_entropy_with_logits``).
    """

    def __init__(self, n_features: int, gen: np.random.Generator, dtype=np.float32):
        self.weight = Parameter(init.xavier_normal(gen, n_features, 1, (n_features,), dtype))
        self.bias = Parameter(init.constant(0.0, (1,), dtype))

    def forward(self, idx, val):
        picked = self.weight[idx]  # (B, nnz) the weights of each sample's features
        return (picked * val.astype(self.weight.dtype, copy=False)).sum(axis=1) + self.bias  # (B,)

    def touched(self, batch) -> dict:
        """The parameter rows that ``batch`` (idx, val, y) reads and whose gradient it writes:
        ``{"weight": its distinct feature ids, "bias": [0]}``, int64 on the batch's device.
        Every other row's gradient is exactly 0."""
        xp = get_array_module(batch[0])
        return {"weight": xp.unique(batch[0]), "bias": xp.zeros(1, dtype=np.int64)}
