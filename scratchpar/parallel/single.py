"""The one-device strategy: the training step every parallel strategy must reproduce.

A strategy offers ``step(batch) -> metrics`` and ``state_dict()`` / ``load_state_dict()``, and
exposes ``model`` and ``optimizer``; the training loop, checkpoints and metrics use only these,
and three optional collectives: ``shutdown()`` when the loop ends (a parameter server's workers
leave; server 0 returns a report of the run), ``finish()`` after the last step (local SGD
averages its replicas) and ``gather_model()`` before the held-out evaluation (a pipeline's
stages fill rank 0's model). A strategy whose ranks do not judge each step alike sets
``lockstep = False``: a rank that diverges then ends the job itself.
"""

from __future__ import annotations

from ..optim import guarded_step


class SingleDevice:
    """Forward, backward, clip, update: θ ← θ − η·∇L(θ; batch), on one device; a step whose
    loss or gradient is not finite is skipped (:func:`~scratchpar.optim.guarded_step`)."""

    def __init__(self, model, optimizer, loss_fn, grad_clip: float = 0.0):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.grad_clip = grad_clip
        self.params = model.parameters()

    def step(self, batch) -> dict:
        """One optimizer step on ``batch``: ``{"loss", "grad_norm" (unclipped), "skipped"}``."""
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.model, batch)
        loss.backward()
        return guarded_step(self.optimizer, self.params, loss.data, self.grad_clip)

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optim": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optim"])
