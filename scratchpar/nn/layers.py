"""Basic layers: Linear, Embedding, LayerNorm, Dropout and the activation functions."""

from __future__ import annotations

import numpy as np

from ..autograd import functional as F
from ..device_rng import DeviceRandom
from . import init
from .module import Module, Parameter


class Linear(Module):
    """(..., D) → (..., F): y = x·W + b with W (D, F). Kaiming init before a ReLU, else Xavier."""

    def __init__(self, in_features: int, out_features: int, gen: np.random.Generator,
                 bias: bool = True, dtype=np.float32, relu_follows: bool = False):
        shape = (in_features, out_features)
        w = (init.kaiming_uniform(gen, in_features, shape, dtype) if relu_follows
             else init.xavier_uniform(gen, in_features, out_features, shape, dtype))
        self.weight = Parameter(w)
        self.bias = Parameter(init.constant(0.0, (out_features,), dtype)) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class Embedding(Module):
    """(...) int ids → (..., D): rows of a (V, D) table, Xavier-normal init."""

    def __init__(self, num_embeddings: int, dim: int, gen: np.random.Generator, dtype=np.float32):
        self.weight = Parameter(init.xavier_normal(gen, num_embeddings, dim,
                                                   (num_embeddings, dim), dtype))

    def forward(self, ids):
        return F.gather(self.weight, ids)


class LayerNorm(Module):
    """(..., D) → (..., D), normalized over D, then γ ⊙ x̂ + β."""

    def __init__(self, dim: int, dtype=np.float32, eps: float = 1e-5):
        self.weight = Parameter(init.constant(1.0, (dim,), dtype))
        self.bias = Parameter(init.constant(0.0, (dim,), dtype))
        self.eps = eps

    def forward(self, x):
        return F.layer_norm(x, self.weight, self.bias, self.eps)


class Dropout(Module):
    """Zero entries with probability p while training; masks come from the generator that
    :func:`set_dropout_generator` gives the model (one stream, saved with checkpoints)."""

    def __init__(self, p: float):
        self.p, self.gen = p, None

    def forward(self, x):
        if self.training and self.p > 0 and self.gen is None:
            raise RuntimeError("Dropout needs a generator: call nn.set_dropout_generator(model, "
                               "gen) before training")
        return F.dropout(x, self.p, self.gen, self.training)


def set_dropout_generator(model: Module, gen: DeviceRandom) -> None:
    """Let every Dropout in ``model`` draw its masks from ``gen`` (on the model's device)."""
    for _, module in model.named_modules():
        if isinstance(module, Dropout):
            module.gen = gen


def dropout_generator(model: Module) -> DeviceRandom | None:
    """The stream ``model``'s dropouts draw from, where any of them drops anything."""
    return next((module.gen for _, module in model.named_modules()
                 if isinstance(module, Dropout) and module.p > 0), None)


class ReLU(Module):
    def forward(self, x):
        return F.relu(x)


class GELU(Module):
    def forward(self, x):
        return F.gelu(x)


class Tanh(Module):
    def forward(self, x):
        return F.tanh(x)
