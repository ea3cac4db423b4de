"""The one-device strategy: the training step every parallel strategy must reproduce.

A strategy offers ``step(batch) -> metrics`` and ``state_dict()`` / ``load_state_dict()``, and
exposes ``model`` and ``optimizer``; the training loop, checkpoints and metrics use only these.
"""

from __future__ import annotations

from ..optim import clip_grad_norm


class SingleDevice:
    """Forward, backward, clip, update: θ ← θ − η·∇L(θ; batch), on one device."""

    def __init__(self, model, optimizer, loss_fn, grad_clip: float = 0.0):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.grad_clip = grad_clip
        self.params = model.parameters()

    def step(self, batch) -> dict:
        """One optimizer step on ``batch``; returns ``{"loss": …}`` (and the pre-clip grad norm)."""
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.model, batch)
        loss.backward()
        metrics = {"loss": loss.item()}
        if self.grad_clip > 0:
            metrics["grad_norm"] = clip_grad_norm(self.params, self.grad_clip)
        self.optimizer.step()
        return metrics

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optim": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optim"])
