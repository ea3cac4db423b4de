"""Synchronous EASGD: every τ steps the ranks all-reduce their elastic differences (Zhang et al.
2015, §3, eqs. 3–4; τ is §3's communication period)."""

from __future__ import annotations

from ...backend import get_array_module
from ...comm import collectives
from ...comm.buckets import Buckets
from ...comm.chunks import bounds
from ...data.shard import Part, shard
from .. import local_step
from ..description import Description, Message, bucketed, replicated
from ..strategy import Strategy, whole_model
from .state import ElasticState


class SyncEASGD(ElasticState, Strategy):
    """Each rank is a worker with its own parameters xⁱ, stepping on its shard of the global
    batch, the only rows it draws (:meth:`rows`). Every rank also holds the centre x̃, the same
    on all. With α = ηρ (η the step's rate), at every step t with t mod τ = 0, before the
    gradient step and from the same xⁱₜ:

        xⁱ ← xⁱ − α (xⁱ − x̃)           (eq. 3, the elastic term)
        x̃  ← x̃ + α Σᵢ (xⁱ − x̃)        (eq. 4; one all-reduce of the differences)

    and then xⁱ ← xⁱ − η ∇fⁱ(xⁱₜ), the gradient taken before the exchange (the worker's summed
    loss over its units), so a step is eq. 3 exactly. ρ = 0 leaves every worker an independent
    SGD. The local optimizer is the run's: with Nesterov momentum δ it is EAMSGD (Algorithm 2),
    in PyTorch's form of the look-ahead. The centre is the model that is evaluated and
    checkpointed (``gather_model``, ``state_dict``). In mixed precision the elastic moves act
    on the optimizer's fp32 masters and the centre is fp32: a move of α (xⁱ − x̃) is far below
    a 16-bit weight's ulp once the two are close.
    """

    mode, first = "sync", 0  # every rank is a worker

    def __init__(self, model, make_optimizer, objective, mesh, /, *, rho: float, tau: int,
                 grad_clip: float = 0.0, bucket_bytes: int = 1 << 20):
        comm = whole_model(mesh, type(self).__name__)
        if not rho >= 0 or tau < 1:
            raise ValueError(f"EASGD needs ρ ≥ 0 and τ ≥ 1, got ρ = {rho} and τ = {tau}")
        super().__init__(model, make_optimizer, objective, mesh, grad_clip=grad_clip)
        self.rho, self.tau = rho, tau
        for p in self.params:  # every worker and the centre start from rank 0's weights
            collectives.broadcast_(comm, p.data)
        self.centre = [w.copy() for w in self.optimizer.weights()]  # x̃, fp32 beside 16-bit xⁱ
        self.plan = Buckets(self.centre, bucket_bytes)
        self.steps = 0  # t

    @classmethod
    def describe(cls, shape, world: int, *, tau: int = 4,
                 bucket_bytes: int = 1 << 20) -> Description:
        """A worker's model, gradient and optimizer state with the centre x̃ beside them, and
        the differences xⁱ − x̃ and their bucket copy (all three as the masters are: fp32 in
        mixed precision). Each step: one all-reduce of [L, n, ‖g‖], and every τ steps the
        differences summed in buckets (eq. 4), exposed."""
        wide = shape.widened()
        p = wide.bytes
        return Description(replicated(shape, parameters=p, buffers=2 * p),
                           (Message("all-reduce", "dp", 24, 1),
                            bucketed(wide, bucket_bytes, "all-reduce", "dp", every=tau,
                                     backward=False)),
                           chunk=shape.largest, arrays=shape.stepped)

    def rows(self, batch_size: int) -> tuple[int, int]:
        """This worker's shard alone: the others' are never drawn here."""
        return bounds(batch_size, self.comm.size)[self.comm.rank]

    def step(self, global_batch) -> dict:
        """One step of every worker: ``{"loss": mean over the global batch, "grad_norm": this
        worker's, "skipped"}``, and ``"units"``, N over every worker, when handed a
        :class:`~scratchpar.data.shard.Part`. A step is skipped on every rank if any rank's loss
        or gradient is not finite (one small all-reduce gives the loss, N and that verdict)."""
        batch = shard(global_batch, self.comm.rank, self.comm.size)
        self.optimizer.zero_grad()
        loss, n, _ = self.backward_mean(batch)  # ∇fⁱ(xⁱ), this worker's mean gradient
        verdict = local_step.agree(self.comm, self.params, loss, n)
        t, self.steps = self.steps, self.steps + 1
        if verdict.finite and t % self.tau == 0:
            self.exchange(self.optimizer.lr * self.rho)
        metrics = verdict.step(self.optimizer, self.params, self.grad_clip)
        if isinstance(global_batch, Part):  # the loop drew this rank's rows alone
            metrics["units"] = verdict.units
        return metrics

    def exchange(self, alpha: float) -> None:
        """The elastic moves of eqs. 3–4, from this step's xⁱ and x̃, on every rank alike."""
        weights = self.optimizer.weights()  # xⁱ, its fp32 masters in mixed precision
        diffs = [x - c for x, c in zip(weights, self.centre)]  # xⁱ − x̃
        self.plan.pack(diffs)
        total = self.plan.finish(self.plan.start_all(self.comm))  # Σᵢ (xⁱ − x̃)
        for x, c, d, s in zip(weights, self.centre, diffs, total):
            x -= alpha * d  # eq. 3: xⁱ ← xⁱ − α (xⁱ − x̃)
            c += alpha * s  # eq. 4: x̃ ← x̃ + α Σᵢ (xⁱ − x̃)
        self.optimizer.round_params()

    def gather_model(self) -> None:
        """The model becomes the centre x̃ (every rank holds it): what is evaluated."""
        for p, c in zip(self.params, self.centre):
            get_array_module(p.data).copyto(p.data, c, casting="unsafe")  # rounded to 16 bits
