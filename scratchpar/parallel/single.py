"""The one-device strategy: the training step every parallel strategy must reproduce."""

from __future__ import annotations

from ..optim import guarded_step
from .description import Description, replicated
from .strategy import Strategy


class SingleDevice(Strategy):
    """Forward, backward, clip, update: θ ← θ − η·∇L(θ; batch), on one device. A step whose
    loss or gradient is not finite is skipped (:func:`~scratchpar.optim.guarded_step`)."""

    def __init__(self, model, optimizer, loss_fn, grad_clip: float = 0.0):
        super().__init__(model, optimizer, loss_fn, grad_clip=grad_clip)

    @classmethod
    def describe(cls, shape, world: int = 1) -> Description:
        """The model, its gradient and its optimizer state; no message."""
        return Description(replicated(shape), chunk=shape.largest, arrays=shape.stepped)

    def step(self, batch) -> dict:
        """One optimizer step on ``batch``: ``{"loss", "grad_norm" (unclipped), "skipped"}``."""
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.model, batch)
        loss.backward()
        return guarded_step(self.optimizer, self.params, loss.data, self.grad_clip)
