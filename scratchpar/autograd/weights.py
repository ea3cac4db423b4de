"""Weight gradients left for later: the W of zero-bubble pipelines (Qi et al. 2023, "Zero
Bubble Pipeline Parallelism", §2).

Backward through an op yields its inputs' gradients. Those of activations are what the stage
before waits for (B); those of weights are needed only by the optimizer step (W). A backward
asked to leave some leaves ``later`` runs each op that reads one of them for its other inputs
only, and keeps the op and its output's gradient here. :meth:`Weights.run` computes the rest,
op by op in the order backward met them, and adds them into the leaves as backward would have:
the same sums, in the same order, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable

from .sums import Sums


class Weights:
    """The ops a backward left for later, each with its output's gradient and which of its
    inputs wait (a mask over its inputs)."""

    def __init__(self, run_op: Callable, given: set) -> None:
        self._run_op = run_op  # (op, grad, which inputs) → their gradients
        self._given = given  # arrays already handed to leaves: never handed twice
        self._ops: list[tuple] = []

    def add(self, op, grad, waiting: tuple[bool, ...]) -> None:
        self._ops.append((op, grad, waiting))

    def run(self, on_grad_ready=None) -> None:
        """Compute the waiting gradients and add each into its leaf's ``.grad``; then call
        ``on_grad_ready(leaf)`` per leaf, as backward would."""
        sums, leaves = Sums(), {}
        for op, grad, waiting in self._ops:
            for leaf, wait, g in zip(op.parents, waiting, self._run_op(op, grad, waiting)):
                if wait and g is not None:
                    sums.add(id(leaf), g)
                    leaves.setdefault(id(leaf), leaf)
        self._ops = []  # their graphs go: W runs once
        for key, leaf in leaves.items():
            leaf._accumulate(sums.pop(key), self._given)
            if on_grad_ready is not None:
                on_grad_ready(leaf)
