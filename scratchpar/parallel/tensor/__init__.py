"""Tensor (Megatron) parallelism: layers split across the ranks of a tp group."""

from .feed_forward import ParallelFeedForward
from .linear import ColumnParallelLinear, RowParallelLinear
from .mlp_classifier import TensorParallelMLP
from .shard import tensor_parallel

__all__ = ["ColumnParallelLinear", "ParallelFeedForward", "RowParallelLinear", "TensorParallelMLP",
           "tensor_parallel"]
