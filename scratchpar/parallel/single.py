"""The one-device strategy: the training step every parallel strategy must reproduce."""

from __future__ import annotations

from ..data.shard import rows, shard
from ..optim import global_grad_norm, guarded_step
from ..optim.noise_scale import estimate
from .description import Description, replicated
from .strategy import Strategy


class SingleDevice(Strategy):
    """Forward, backward, clip, update: θ ← θ − η·∇L(θ; batch), on one device, with L the
    batch's mean loss: its summed loss over N, its units, as every strategy divides. A step
    whose loss or gradient is not finite is skipped (:func:`~scratchpar.optim.guarded_step`).
    ``mesh``: none (one device).

    With ``noise`` (a :class:`~scratchpar.optim.noise_scale.NoiseScale`), the step runs its
    batch in two halves, as data parallelism's two ranks would, and estimates the gradient
    noise scale from each half's gradient and their sum (McCandlish et al. 2018, Appendix
    A.1): the same step, up to the rounding of a sum taken in two parts, for one gradient's
    copy more."""

    def __init__(self, model, make_optimizer, objective, mesh=None, /, *,
                 grad_clip: float = 0.0, noise=None):
        super().__init__(model, make_optimizer, objective, mesh, grad_clip=grad_clip)
        self.noise = noise

    @classmethod
    def describe(cls, shape, world: int = 1) -> Description:
        """The model, its gradient and its optimizer state; no message."""
        return Description(replicated(shape), chunk=shape.largest, arrays=shape.stepped)

    def step(self, batch) -> dict:
        """One optimizer step on ``batch``: ``{"loss", "grad_norm" (unclipped), "skipped"}``,
        and with a noise scale ``gradient_sq``, ``gradient_trace`` and ``noise_scale``."""
        self.optimizer.zero_grad()
        if self.noise is not None:
            return self._in_halves(batch)
        loss, _, scale = self.backward_mean(batch)
        return guarded_step(self.optimizer, self.params, loss * scale, self.grad_clip)

    def _in_halves(self, batch) -> dict:
        """The step's mean gradient as the units-weighted sum of its halves' summed ones."""
        halves = [half for half in (shard(batch, k, 2) for k in range(2)) if rows(half)]
        summed, squares, units, total = [], [], [], 0.0
        for half in halves:
            self.optimizer.zero_grad()
            loss, n = self.sum_loss(half)
            loss.backward()
            n = float(n)
            squares.append((global_grad_norm(self.params) / max(n, 1.0)) ** 2)
            summed.append([p.grad for p in self.params])
            units.append(n)
            total += loss.data
        scale = 1.0 / max(sum(units), 1.0)
        for i, p in enumerate(self.params):
            parts = [grads[i] for grads in summed if grads[i] is not None]
            p.grad = None if not parts else sum(parts[1:], parts[0]) * scale
        metrics = guarded_step(self.optimizer, self.params, total * scale, self.grad_clip)
        sample = None if metrics["skipped"] else estimate(
            squares, [rows(half) for half in halves], metrics["grad_norm"] ** 2)
        return {**metrics, "gradient_sq": None if sample is None else sample.gradient_sq,
                "gradient_trace": None if sample is None else sample.trace,
                "noise_scale": self.noise.update(sample)}
