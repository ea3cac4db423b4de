"""The MLP classifier split across a tp group: its Linear layers alternate column and row."""

from __future__ import annotations

from ...nn.layers import Linear
from ...nn.mlp import LinearStack
from .linear import ColumnParallelLinear, RowParallelLinear


class TensorParallelMLP(LinearStack):
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
        super().__init__(*shards)  # pipeline layers as nn.MLP lists them
