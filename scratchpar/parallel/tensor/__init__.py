"""Tensor (Megatron) parallelism: layers split across the ranks of a tp group."""

from .classifier import TensorParallelMLP
from .linear import ColumnParallelLinear, RowParallelLinear
from .mlp import ParallelMLP
from .shard import tensor_parallel

__all__ = ["ColumnParallelLinear", "ParallelMLP", "RowParallelLinear", "TensorParallelMLP",
           "tensor_parallel"]
