"""Weight gradients left for later: the W of zero-bubble pipelines (Qi et al. 2023, "Zero
Bubble Pipeline Parallelism", §2).

Backward through an op yields its inputs' gradients. Those of activations are what the stage
before waits for (B); those of weights are needed only by the optimizer step (W). A backward
given ``hooks=Weights(leaves)`` runs each op that reads one of those leaves for its other inputs
only, and keeps the op and its output's gradient. :meth:`Weights.run` computes the rest, op by
op in the order backward met them, and adds them into the leaves as backward would have: the
same sums, in the same order, bit for bit.
"""

from __future__ import annotations

from .sums import Sums
from .tensor import Context, Hooks


class Weights(Hooks):
    """The hooks of a backward that leaves ``leaves``' gradients for :meth:`run`; it keeps the
    ops that read them, each with its output's gradient and which of its inputs wait (a mask
    over its inputs)."""

    def __init__(self, leaves) -> None:
        super().__init__()
        self._waiting = {id(leaf) for leaf in leaves}
        self._ops: list[tuple] = []

    def propagate(self, node: Context, g) -> tuple:
        """B: the gradients of ``node``'s inputs but the waiting leaves'; the op kept for W."""
        wait = tuple(id(p) in self._waiting for p in node.parents)
        if True not in wait:
            return super().propagate(node, g)
        self._ops.append((node, g, wait))
        now = tuple(need and not w for need, w in zip(node.needs_input_grad, wait))
        return node.vjp(g, now) if True in now else ()

    def run(self) -> None:
        """W: compute the waiting gradients and add each into its leaf's ``.grad``; then
        :meth:`grad_ready` per leaf, as backward would."""
        sums, leaves = Sums(), {}
        for op, grad, waiting in self._ops:
            for leaf, g in zip(op.parents, op.vjp(grad, waiting)):
                if g is not None:
                    sums.add(id(leaf), g)
                    leaves.setdefault(id(leaf), leaf)
        self._ops = []  # their graphs go: W runs once
        for key, leaf in leaves.items():
            leaf._accumulate(sums.pop(key), self.handed)
            self.grad_ready(leaf)
