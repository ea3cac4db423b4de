"""A leaf's gradient reported the moment it is final: data parallelism's buckets start during
backward (Li et al. 2020, "PyTorch Distributed", §3.2).

Backward visits a node only after every consumer of its output, and places each leaf right
after its last consumer (``tensor._topological_order``): a leaf receives its whole gradient at
once, as early as the graph allows, so a bucket's all-reduce can start while backward goes on.
"""

from __future__ import annotations

from collections.abc import Callable

from .tensor import Hooks, Tensor


class GradReady(Hooks):
    """``fn(leaf)`` once per leaf that backward reaches, as soon as its ``.grad`` is final."""

    def __init__(self, fn: Callable[[Tensor], None]) -> None:
        super().__init__()
        self.fn = fn

    def grad_ready(self, leaf: Tensor) -> None:
        self.fn(leaf)
