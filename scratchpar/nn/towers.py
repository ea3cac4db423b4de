"""Independent towers over one input, joined by a linear head: a model made to split by branches."""

from __future__ import annotations

import numpy as np

from ..autograd import functional as F
from .layers import Linear, ReLU
from .module import Module, ModuleList, Sequential


def tower(in_features: int, sizes: list[int], gen: np.random.Generator, dtype) -> Sequential:
    """(B, in_features) → (B, sizes[-1]): Linear then ReLU for each size."""
    layers = []
    for d_in, d_out in zip([in_features, *sizes[:-1]], sizes):
        layers += [Linear(d_in, d_out, gen, dtype=dtype, relu_follows=True), ReLU()]
    return Sequential(*layers)


class Towers(Module):
    """(B, F) → k towers, each (B, F) → (B, H) → joined (B, k·H) → head → (B, n_classes).

    The towers share no weights and no activations: each sees only x and feeds only the join,
    so they may run anywhere, as the two GPUs' columns of Krizhevsky et al. 2012 (§3.2) do
    between the layers where they communicate. Parameters are ``towers.<i>.<j>.weight`` (j the
    Linear's place in tower i) and ``head.weight``/``head.bias``.
    """

    def __init__(self, in_features: int, tower_sizes: list[int], k: int, n_classes: int,
                 gen: np.random.Generator, dtype=np.float32):
        if k < 1 or not tower_sizes:
            raise ValueError(f"Towers needs k ≥ 1 and a tower size, got k={k}, {tower_sizes}")
        self.k, self.width = k, tower_sizes[-1]
        self.towers = ModuleList([tower(in_features, tower_sizes, gen, dtype) for _ in range(k)])
        self.head = Linear(k * self.width, n_classes, gen, dtype=dtype)

    def forward(self, x):
        joined = F.concat([t(x) for t in self.towers], axis=-1)  # (B, k·H)
        return self.head(joined)  # (B, n_classes)
