"""Tensor (Megatron) parallelism: layers split across the ranks of a tp group."""

from .linear import ColumnParallelLinear, RowParallelLinear
from .mlp import ParallelMLP

__all__ = ["ColumnParallelLinear", "ParallelMLP", "RowParallelLinear"]
