"""Local SGD: independent steps on each rank's shard, parameters averaged every few steps."""

from __future__ import annotations

from ..autograd.precision import WIDE, is_low
from ..comm.buckets import Buckets
from ..comm.states import gather_states
from ..data.shard import Part, shard
from . import local_step
from .description import Description, Message, bucketed, replicated
from .dp import DataParallel
from .strategy import Strategy, whole_model


class LocalSGD(Strategy):
    """Each rank steps on its own shard's mean gradient; every ``every`` steps θ ← mean over ranks.

    Lin et al. 2020 ("Don't use large mini-batches, use local SGD"): the first ``warmup`` steps are
    synchronous data-parallel steps, then every rank runs its optimizer alone and the replicas are
    averaged, θ ← (1/p) Σᵣ θᵣ, after every ``every``-th local step. ``every = 0`` never averages
    until :meth:`finish`: one-shot model averaging after independent SGD (Zinkevich et al. 2010).
    Optimizer state (momentum, Adam moments) stays local; a checkpoint keeps every rank's. In
    mixed precision the replicas average their fp32 masters, the weights as each optimizer
    holds them, in fp32, and round the mean into the 16-bit model.
    """

    def __init__(self, model, make_optimizer, objective, mesh, /, *, every: int = 8,
                 warmup: int = 0, grad_clip: float = 0.0, bucket_bytes: int = 1 << 20):
        if every < 0 or warmup < 0:
            raise ValueError(f"every and warmup must be >= 0, got {every} and {warmup}")
        super().__init__(model, make_optimizer, objective, mesh, grad_clip=grad_clip)
        whole_model(mesh, "LocalSGD")
        self.sync = DataParallel(model, lambda _: self.optimizer, objective, mesh,  # one rule
                                 bucket_bytes=bucket_bytes, grad_clip=grad_clip)
        arrays = [p.data for p in self.sync.params]
        self.plan = Buckets(arrays, bucket_bytes,  # for averaging, in fp32 under 16 bits
                            into=WIDE if is_low(arrays[0].dtype) else None)
        self.every, self.warmup = every, warmup
        self.steps = 0  # steps taken, synchronous ones included
        self.diverged = False  # True while local steps have not been averaged yet

    @classmethod
    def describe(cls, shape, world: int, every: int = 8,
                 bucket_bytes: int = 1 << 20) -> Description:
        """A replica and its buckets for averaging (as the masters are: fp32 in mixed
        precision) beside data parallelism's (the warm-up's steps). Each local step: one
        all-reduce of [L, n, ‖g‖], and every ``every`` steps the model averaged in buckets,
        exposed (once, at the end, when ``every`` is 0)."""
        wide = shape.widened()
        sends = [Message("all-reduce", "dp", 24, 1)]
        if every:
            sends.append(bucketed(wide, bucket_bytes, "all-reduce", "dp", every=every,
                                  backward=False))
        return Description(replicated(shape, parameters=wide.bytes, buffers=2 * shape.bytes),
                           tuple(sends), chunk=shape.largest, arrays=shape.stepped)

    def rows(self, batch_size: int) -> tuple[int, int]:
        """This rank's shard alone, as data parallelism's."""
        return self.sync.rows(batch_size)

    def step(self, global_batch) -> dict:
        """One step: ``{"loss": mean over the global batch, "grad_norm": this replica's,
        "skipped"}``. One tiny all-reduce gives the loss and the verdict on finiteness: a step
        is skipped on every replica if any replica's loss or gradient is not finite."""
        self.steps += 1
        if self.steps <= self.warmup:
            return self.sync.step(global_batch)
        self.optimizer.zero_grad()
        batch = shard(global_batch, self.comm.rank, self.comm.size)
        loss, n, _ = self.backward_mean(batch)  # Lᵣ summed over this rank's nᵣ units
        verdict = local_step.agree(self.comm, self.params, loss, n)
        metrics = verdict.step(self.optimizer, self.params, self.grad_clip)
        if isinstance(global_batch, Part):  # the loop drew this rank's rows alone
            metrics["units"] = verdict.units
        if metrics["skipped"]:  # nothing moves, the period's averaging included
            return metrics
        self.diverged = True
        if self.every and (self.steps - self.warmup) % self.every == 0:
            self.average()
        return metrics

    def average(self) -> None:
        """θ ← (1/p) Σᵣ θᵣ on every rank, in buckets like DP's gradients: the replicas become
        bitwise identical."""
        weights = self.optimizer.weights()  # fp32 masters in mixed precision
        self.plan.pack(weights)
        self.plan.finish(self.plan.start_all(self.comm, op="avg"), out=weights)
        self.optimizer.round_params()
        self.diverged = False

    def finish(self) -> None:
        """Average the replicas if they have moved apart since the last averaging."""
        if self.diverged:
            self.average()

    def state_dict(self) -> dict | None:
        """Collective: the whole run on rank 0, ``None`` on the other ranks.

        Parts: ``"model"``/``"optim"`` (rank 0's replica, so any strategy can load it),
        ``"rank{r}.optim"`` for every other rank r, ``"rank{r}.model"`` only while the
        replicas differ (``diverged``), and ``"local_sgd"``: steps, world size, diverged.
        """
        xp = self.sync.xp
        what = "local SGD replica states"
        optims = gather_states(self.comm, self.optimizer.state_dict(), xp, what)
        models = gather_states(self.comm, self.model.state_dict(), xp, what) \
            if self.diverged else None
        if self.comm.rank != 0:
            return None
        state = {"model": self.model.state_dict(), "optim": optims[0],
                 "local_sgd": {"steps": self.steps, "world": self.comm.size,
                               "diverged": self.diverged}}
        for r in range(1, self.comm.size):
            if models:
                state[f"rank{r}.model"] = models[r]
            state[f"rank{r}.optim"] = optims[r]
        return state

    def load_state_dict(self, state: dict) -> None:
        """Continue the run that :meth:`state_dict` saved (or a data-parallel one: one replica).

        At the world size that wrote it, rank r restores replica r exactly, so the run goes on
        bit-identically. At another world size the shards change, so this is an averaging point:
        every rank loads θ ← (1/p) Σᵣ θᵣ over the p saved replicas, and the optimizer state of
        saved replica r (replica 0's if there are fewer), taken whole so that its buffers and
        counters stay consistent.
        """
        meta = state.get("local_sgd", {})
        saved, diverged = int(meta.get("world", 1)), bool(meta.get("diverged", False))
        rank = self.comm.rank
        if saved == self.comm.size:
            model, source = _replica(state, rank if diverged else 0, "model"), rank
            optim = _replica(state, source, "optim")
        else:
            replicas = range(saved if diverged else 1)
            model = _mean([_replica(state, q, "model") for q in replicas])
            source, diverged = (rank if rank < saved else 0), False
            optim = _replica(state, source, "optim")
            masters = [key for key in optim if key.startswith("master.")]  # mixed precision's
            optim = {**optim, **_mean([{key: _replica(state, q, "optim")[key] for key in masters}
                                       for q in replicas])} if masters else optim
        self.model.load_state_dict(model)
        self.optimizer.load_state_dict(optim)
        self.steps, self.diverged = int(meta.get("steps", 0)), diverged


def _replica(state: dict, r: int, name: str) -> dict:
    """Part ``name`` ("model" or "optim") of saved replica r."""
    return state[name] if r == 0 else state[f"rank{r}.{name}"]


def _mean(states: list[dict]) -> dict:
    """θ ← (1/p) Σᵣ θᵣ, entry by entry, summed in rank order (the same bits on every rank)."""
    return {k: sum(s[k] for s in states) / len(states) for k in states[0]}
