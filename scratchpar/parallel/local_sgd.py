"""Local SGD: independent steps on each rank's shard, parameters averaged every few steps."""

from __future__ import annotations

from ..comm import collectives
from ..optim import clip_grad_norm
from .dp import DataParallel


class LocalSGD:
    """Each rank steps on its own shard's mean gradient; every ``every`` steps θ ← mean over ranks.

    Lin et al. 2020 ("Don't use large mini-batches, use local SGD"): the first ``warmup`` steps are
    synchronous data-parallel steps, then every rank runs its optimizer alone and the replicas are
    averaged, θ ← (1/p) Σᵣ θᵣ, after every ``every``-th local step. ``every = 0`` never averages
    until :meth:`finish`: one-shot model averaging after independent SGD (Zhang et al. 2016).
    Optimizer state (momentum, Adam moments) stays local.
    """

    def __init__(self, model, optimizer, loss_fn, count_fn, comm, every: int, warmup: int = 0,
                 grad_clip: float = 0.0):
        if every < 0 or warmup < 0:
            raise ValueError(f"every and warmup must be >= 0, got {every} and {warmup}")
        self.sync = DataParallel(model, optimizer, loss_fn, count_fn, comm, grad_clip=grad_clip)
        self.model, self.optimizer, self.comm = model, optimizer, comm
        self.every, self.warmup, self.grad_clip = every, warmup, grad_clip
        self.steps = 0  # steps taken, synchronous ones included
        self.diverged = False  # True while local steps have not been averaged yet

    def step(self, global_batch) -> dict:
        """One step; ``{"loss": mean loss over the global batch (one tiny all-reduce), …}``."""
        self.steps += 1
        if self.steps <= self.warmup:
            return self.sync.step(global_batch)
        loss, n = self.sync.local_loss(global_batch)  # Lᵣ summed over this rank's nᵣ units
        totals = collectives.all_reduce_start(
            self.comm, self.sync.xp.array([loss.item(), n], dtype="float64"))
        (loss * (1.0 / max(n, 1))).backward()  # this rank's mean gradient
        metrics = {}
        if self.grad_clip > 0:
            metrics["grad_norm"] = clip_grad_norm(self.sync.params, self.grad_clip)
        self.optimizer.step()
        self.diverged = True
        if self.every and (self.steps - self.warmup) % self.every == 0:
            self.average()
        loss_sum, total = (float(v) for v in totals.wait())
        return {"loss": loss_sum / max(total, 1.0), **metrics}

    def average(self) -> None:
        """θ ← (1/p) Σᵣ θᵣ on every rank: the replicas become bitwise identical."""
        for p in self.sync.params:
            collectives.all_reduce_(self.comm, p.data, "avg")
        self.diverged = False

    def finish(self) -> None:
        """Average the replicas if they have moved apart since the last averaging."""
        if self.diverged:
            self.average()

    def state_dict(self) -> dict:
        return {**self.sync.state_dict(), "local_sgd": {"steps": self.steps}}

    def load_state_dict(self, state: dict) -> None:
        self.sync.load_state_dict(state)
        self.steps = int(state.get("local_sgd", {}).get("steps", 0))
