"""An MLP classifier: Linear–ReLU stacks ending in class logits."""

from __future__ import annotations

import numpy as np

from .layers import Linear, ReLU
from .module import Module, Sequential


class LinearStack(Sequential):
    """Linear layers, each but the last followed by its ReLU, run in order. A pipeline sees
    each Linear with its ReLU as one layer, and the last Linear alone."""

    def __init__(self, *layers):
        super().__init__(*layers)
        # a tuple, so Module does not walk it: each Linear with its ReLU, the last Linear alone
        pairs = [layers[i:i + 2] for i in range(0, len(layers), 2)]
        self._layers = tuple(Sequential(*pair) if len(pair) == 2 else pair[0] for pair in pairs)

    def pipeline_layers(self) -> list[Module]:
        """[Linear+ReLU, …, Linear]: their composition is forward."""
        return list(self._layers)

    def forward(self, x):
        for layer in self._layers:
            x = layer(x)  # (B, D_i)
        return x


class MLP(LinearStack):
    """(B, sizes[0]) → (B, sizes[-1]) logits, ReLU between layers (e.g. 784-512-512-10)."""

    def __init__(self, sizes: list[int], gen: np.random.Generator, dtype=np.float32):
        layers = []
        for i, (d_in, d_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            last = i == len(sizes) - 2
            layers.append(Linear(d_in, d_out, gen, dtype=dtype, relu_follows=not last))
            if not last:
                layers.append(ReLU())
        super().__init__(*layers)
