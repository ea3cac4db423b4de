"""The MLP classifier split across a tp group: its Linear layers alternate column and row."""

from __future__ import annotations

from ...nn.layers import Linear
from ...nn.module import Module, Sequential
from .linear import ColumnParallelLinear, RowParallelLinear


class TensorParallelMLP(Sequential):
    """(B, F) → (B, K) logits on every rank, from ``nn.MLP``'s own weights and names.

    Linear layers 0, 2, 4, … split by columns and 1, 3, … by rows (Megatron §3, Fig. 3a, pair
    after pair): a column layer's output slice goes through its ReLU into the row layer as is,
    and the row layer's sum (g) is whole again. A last column layer gathers its output, so the
    loss is computed alike on every rank. One all-reduce forward and one backward per pair.
    """

    def __init__(self, mlp, comm):
        linears = [m for m in mlp if isinstance(m, Linear)]
        shards, k = [], 0
        for module in mlp:
            if isinstance(module, Linear):
                last = k == len(linears) - 1
                shards.append(RowParallelLinear(module, comm) if k % 2 else
                              ColumnParallelLinear(module, comm, gather_output=last))
                k += 1
            else:
                shards.append(module)
        super().__init__(*shards)
        pairs = [shards[i:i + 2] for i in range(0, len(shards), 2)]
        self._layers = tuple(Sequential(*pair) if len(pair) == 2 else pair[0] for pair in pairs)

    def pipeline_layers(self) -> list[Module]:
        """[Linear+ReLU, …, Linear], as ``nn.MLP`` lists them."""
        return list(self._layers)

    def forward(self, x):
        for layer in self._layers:
            x = layer(x)  # (B, D_i), or its slice D_i/t after a column layer
        return x
