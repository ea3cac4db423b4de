"""The one-device strategy: the training step every parallel strategy must reproduce."""

from __future__ import annotations

from ..data.shard import rows, shard
from ..kernels.graph import Replayed
from ..nn.layers import dropout_generator
from ..optim import guarded_step
from .description import Description, replicated
from .pieces import replica_pieces
from .strategy import Strategy


class SingleDevice(Strategy):
    """Forward, backward, clip, update: θ ← θ − η·∇L(θ; batch), on one device, with L the
    batch's mean loss: its summed loss over N, its units, as every strategy divides. A step
    whose loss or gradient is not finite is skipped (:func:`~scratchpar.optim.guarded_step`).
    ``mesh``: none (one device).

    With probes attached, the step runs its batch in as many shards as they ask for, as data
    parallelism's ranks would, and they hear each shard's gradient: two for the gradient noise
    scale (:class:`~scratchpar.parallel.noise.NoiseProbe`; McCandlish et al. 2018, Appendix
    A.1). The same step, up to the rounding of a sum taken in parts, for one gradient's copy
    more.

    With ``cuda_graph``, the step's forward and backward are captured as a CUDA graph once
    its batch's shape is fixed, and replayed (:class:`~scratchpar.kernels.graph.Replayed`):
    the same kernels on the same arrays, without the host launching each. The clip, the
    guard's look at the norm and the update stay outside it: the guard waits for the device,
    which no graph may do. A loss scale is a number the graph holds, so a new one captures
    again. Dropout's stream goes in as an origin in device memory, so each replay draws the
    masks the plain step would. Probes run their shards uncaptured.
    """

    moments = frozenset({"shard", "gradient", "report"})

    def __init__(self, model, make_optimizer, objective, mesh=None, /, *,
                 grad_clip: float = 0.0, cuda_graph: bool = False):
        super().__init__(model, make_optimizer, objective, mesh, grad_clip=grad_clip)
        self.replayed = (Replayed(self._forward_backward, dropout_generator(self.model))
                         if cuda_graph else None)

    @classmethod
    def describe(cls, shape, world: int = 1) -> Description:
        """The model, its gradient and its optimizer state; no message."""
        return Description(replicated(shape), chunk=shape.largest, arrays=shape.stepped)

    def pieces(self) -> tuple[list, dict]:
        """The whole state, written as it is held (no copy of it)."""
        return replica_pieces(self.model, self.optimizer, None)

    def step(self, batch) -> dict:
        """One optimizer step on ``batch``: ``{"loss", "grad_norm" (unclipped), "skipped"}``,
        and what the probes attached report."""
        self.optimizer.zero_grad()
        if self.probes.attached:
            return self._in_shards(batch, self.probes.shards)
        if self.replayed is None:
            loss, _, scale = self.backward_mean(batch)
        else:
            loss, scale, grads = self.replay(self.replayed, batch)
            for p, grad in zip(self.params, grads):
                p.grad = grad  # the captured gradients, rewritten by each replay
        return guarded_step(self.optimizer, self.params, loss * scale, self.grad_clip)

    def _forward_backward(self, *batch):
        """What the graph holds: the forward, the backward and the division by N, from no
        gradient (as captured: the backward's first writes are then stores, not sums)."""
        self.optimizer.zero_grad()
        loss, _, scale = self.backward_mean(batch if len(batch) > 1 else batch[0])
        return loss, scale, [p.grad for p in self.params]

    def _in_shards(self, batch, parts: int) -> dict:
        """The step's mean gradient as the units-weighted sum of its shards' summed ones."""
        shards = [part for part in (shard(batch, k, parts) for k in range(parts)) if rows(part)]
        summed, units, total = [], [], 0.0
        for part in shards:
            self.optimizer.zero_grad()
            loss, n = self.sum_loss(part)
            loss.backward()
            n = float(n)
            self.probes.shard(rows(part), n)
            for p in self.params:
                if p.grad is not None:
                    self.probes.gradient(p.grad)
            summed.append([p.grad for p in self.params])
            units.append(n)
            total += loss.data
        scale = 1.0 / max(sum(units), 1.0)
        for i, p in enumerate(self.params):
            parts = [grads[i] for grads in summed if grads[i] is not None]
            p.grad = None if not parts else sum(parts[1:], parts[0]) * scale
        metrics = guarded_step(self.optimizer, self.params, total * scale, self.grad_clip)
        return {**metrics, **self.probes.report(metrics)}
