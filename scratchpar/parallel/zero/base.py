"""What every ZeRO stage shares: the sharded update, its buckets, its holdings, its state."""

from __future__ import annotations

import abc

import numpy as np

from ...autograd import no_grad
from ...backend import get_array_module, to_host
from ...comm import collectives
from ...comm.chunks import counts
from ...comm.overlap import Overlap
from ...data.shard import shard
from ...optim.clip import norm_of
from ...optim.guard import read_scalars
from ..context import Context, context_parallel, context_score
from ..dp import DataParallelNaive
from ..experts import experts_over
from ..objective import require
from .flat import Shard
from .formula import describe
from .offload import HostUpdate
from .pieces import load_zero_pieces, zero_pieces
from .update import DeviceUpdate


class ZeRO(DataParallelNaive, metaclass=abc.ABCMeta):
    """Data parallelism in which each rank owns 1/N of the update (Rajbhandari et al. 2020).

    The parameters are laid out in flat groups (:class:`~.flat.FlatGroup`). Rank r owns chunk
    r of every group, keeps the optimizer state of its chunks only, and steps only them. A
    stage says what else it stops replicating (the gradient, then the parameters) by how it
    stores a group (:meth:`_store`) and reduces its gradient. The loss, the 1/N scaling and
    the guard are :class:`~scratchpar.parallel.dp.DataParallelNaive`'s. The gradient norm is
    the square root of the squared norms of every rank's chunks, summed by an all-reduce.

    Each group's gradient is a bucket (:class:`~scratchpar.comm.overlap.Overlap` starts them
    in order): a stage says how it starts bucket k (:meth:`_start_bucket`) and what it does
    with the reduced chunk (:meth:`_finished`).

    On a dp × cp mesh (``Mesh(comm, cp=…)``) a GPT's sequences split over cp too: each rank
    of a cp group runs the model on its ``layout``'s positions of its replica's rows, attending
    by ``attention`` (:func:`~scratchpar.parallel.context.context_parallel`). The chunks are
    the world's (dp × cp ranks), so the reduce-scatter sums the gradient over dp and cp at once.
    A sparse model routes over the dp × cp ranks (:func:`~scratchpar.parallel.experts.
    experts_over`), its drops and balancing loss the batch's, every rank holding every expert.

    ``offload``: the update runs on the host (:class:`~.offload.HostUpdate`). A
    :class:`~scratchpar.parallel.ledger.Ledger` attached (:meth:`attach`) samples what the
    stage holds (:meth:`holdings`) at the step's boundaries and after the hooks wrapped in
    ``probes.after``: where a collective starts or finishes, where a layer is freed.
    """

    moments = frozenset({"forward", "moment"})
    splits_sequences = True

    def __init__(self, model, make_optimizer, objective, mesh, /, *, bucket_bytes: int = 1 << 20,
                 grad_clip: float = 0.0, offload: bool = False, attention: str = "ring",
                 layout: str = "zigzag"):
        super().__init__(model, None, objective, mesh, grad_clip=grad_clip)  # steps its shards
        if mesh.cp > 1:  # a GPT's sequences over cp: its cores swapped, its positions cut
            require(objective, staged=True)
            self.context = Context(mesh.cp_comm.dup(name="context"), layout)
            context_parallel(self.model, self.context, attention)
        self.experts = experts_over(self.model, mesh, self.context)  # a sparse model's routing
        # a collective's start, where what a stage holds changes
        self._reduce_scatter_start = self.probes.after(collectives.reduce_scatter_start)
        self.index = {id(p): i for i, p in enumerate(self.params)}
        self.shapes = [tuple(p.shape) for p in self.params]  # before stage 3 frees them
        self.groups = self._plan(bucket_bytes)
        self.group_of = {id(p): k for k, g in enumerate(self.groups) for p in g.params}
        self.flats = [self._store(g) for g in self.groups]  # each group's parameter storage
        shards = [Shard(self._chunk(k)) for k in range(len(self.groups))]
        self.update = (HostUpdate if offload else DeviceUpdate)(shards, make_optimizer)
        self._optimizer = self.update.optimizer  # over this rank's shards
        self.overlap = Overlap([len(g.params) for g in self.groups], self._start_bucket,
                               self._finished, self._complete)
        self._buckets = {}  # group → its gradient bucket, while this step holds it

    @classmethod
    def describe(cls, shape, world: int, bucket_bytes: int = 1 << 20,
                 offload: bool = False):
        """ZeRO's per-rank figures for this stage and what the engine holds and sends beside
        them (:func:`~.formula.describe`)."""
        return describe(cls.stage, shape, world, bucket_bytes, offload)

    # -- what a stage defines -----------------------------------------------------------------
    @abc.abstractmethod
    def _plan(self, bucket_bytes: int) -> list:
        """The flat groups."""

    @abc.abstractmethod
    def _store(self, group):
        """Group storage: the whole flat vector (stages 1, 2) or this rank's chunk (stage 3)."""

    def _chunk(self, k: int):
        """This rank's chunk of group k's parameters, which the optimizer steps in place."""
        return self.groups[k].owned(self.flats[k])

    def _refresh(self) -> None:
        """After a step: make the parameters whole again where the stage keeps them whole."""

    @abc.abstractmethod
    def _held(self) -> dict[str, list]:
        """The arrays the stage holds now, by part (its update's beside them: :meth:`holdings`)."""

    @abc.abstractmethod
    def _start_bucket(self, k: int):
        """Group k's gradients packed into its bucket and their reduction started: the handle."""

    @abc.abstractmethod
    def _finished(self, k: int, chunk) -> None:
        """Group k's reduced chunk, once its bucket's reduction is done."""

    def _complete(self, k: int) -> None:
        """Group k's gradients are all final, before its bucket may start."""

    @abc.abstractmethod
    def _backward(self, local) -> None:
        """Backward, and every group's gradient reduced to this rank's chunk."""

    # -- the step -------------------------------------------------------------------------------
    def step(self, global_batch) -> dict:
        """One synchronous step on ``global_batch``: ``{"loss": global mean loss, …}``."""
        self._buckets = {}
        with self.tracer.region("forward", "compute"):
            totals, local = self._forward(global_batch)
        self._backward(local)
        self.probes.moment()
        metrics = self._update(totals)
        self.probes.moment()
        return metrics

    def _update(self, totals) -> dict:
        """Scale the gradient chunks by 1/N, take the global norm, step, refresh."""
        loss_sum, n = totals.wait()
        with self.tracer.region("optimizer", "compute"):
            if self.update.offloaded:  # the host's work takes host numbers
                loss_sum, n = read_scalars(loss_sum, n)
            grads = [s.grad for s in self.update.shards]
            xp = get_array_module(*grads)
            scale = 1.0 / xp.maximum(n, 1.0)
            for g in grads:
                g *= scale
            square = xp.reshape(norm_of(grads).astype("float64") ** 2, (1,))  # Σ over my chunks
            norm = xp.sqrt(collectives.all_reduce_(self.comm, square)[0])
            metrics = self.update.step(loss_sum * scale, norm, self.grad_clip)
        self._count(metrics, n)
        if not metrics["skipped"]:
            with self.tracer.region("gather parameters", "compute"):
                self._refresh()
        return metrics

    def holdings(self) -> dict[str, list]:
        """What the stage and its update hold now, by part, for a ledger."""
        return {**self._held(), **self.update.held()}

    def gradients(self) -> list:
        """The whole reduced gradient of every parameter, gathered (a collective; tests use it)."""
        return self._whole([s.grad for s in self.update.shards])

    # -- layout-free state ---------------------------------------------------------------------
    def _whole(self, chunks) -> list:
        """Per parameter (in ``self.params`` order), the whole array whose chunks these are."""
        out = [None] * len(self.params)
        for group, chunk in zip(self.groups, chunks):
            rows = counts(group.n, self.comm.size)
            whole = collectives.all_gather(self.comm, chunk, rows=rows)
            for p, view in zip(group.params, group.views(whole)):
                out[self.index[id(p)]] = view
        return out

    def state_dict(self) -> dict | None:
        """One device's form: whole parameters under the model's names, and the optimizer's
        state keyed by parameter index, gathered from every rank's chunks (a collective), on
        rank 0; ``None`` on the others."""
        names = [name for name, _ in self.model.named_parameters()]
        model = dict(zip(names, self._parameters()))
        opt = self.optimizer
        optim = {"step_count": opt.step_count, "lr": opt.lr}
        for name in opt.buffers:
            if all(name in s for s in opt.state):
                for i, whole in enumerate(self._whole([s[name] for s in opt.state])):
                    optim[f"{name}.{i}"] = whole
        for name in opt.counters:
            for k, group in enumerate(self.groups):
                if name in opt.state[k]:
                    optim.update({f"{name}.{self.index[id(p)]}": opt.state[k][name]
                                  for p in group.params})
        return {"model": model, "optim": optim} if self.comm.rank == 0 else None

    scores_in_layout = True

    def score(self, batch, task) -> tuple[float, float]:
        """Each rank scores its rows of ``batch`` (``shard``) on the model as the stage holds
        it, and one all-reduce sums [Σ losses, Σ right]: no rank gathers the model."""
        self.model.eval()
        try:
            with no_grad():
                mine = shard(batch, self.mesh.dp_comm.rank, self.mesh.dp)
                loss, right = (task.score(self.model, mine) if self.context is None
                               else context_score(task, self.model, mine, self.context))
        finally:
            self.model.train()
        totals = self.xp.asarray([loss, right], dtype="float64")  # (2,)
        collectives.all_reduce_(self.comm, totals)
        return tuple(float(t) for t in to_host(totals))

    def close(self) -> None:
        """Collective: free the communicators this strategy made (a cp group's, a sparse
        model's routing group's), where it made them."""
        if self.context is not None:
            self.context.comm.free()
        if self.experts is not None:
            self.experts.free()

    def pieces(self) -> tuple[list, dict]:
        """This rank's chunks, as ranges of the one-device arrays (:func:`~.pieces.zero_pieces`)."""
        return zero_pieces(self)

    def load_pieces(self, stored) -> None:
        """This rank's chunks, read from whichever blocks of a checkpoint hold them."""
        load_zero_pieces(self, stored)

    def _parameters(self) -> list:
        """Every parameter whole (stages 1 and 2 hold them so)."""
        return [p.data for p in self.params]

    def load_state_dict(self, state: dict) -> None:
        """Take this rank's chunks of a one-device state (from any strategy, stage or N)."""
        model, sd = state["model"], state["optim"]
        names = [name for name, _ in self.model.named_parameters()]
        problems = [f"missing {k}" for k in names if k not in model]
        problems += [f"unexpected {k}" for k in model if k not in names]
        problems += [f"{k}: shape {tuple(model[k].shape)} != {shape}"
                     for k, shape in zip(names, self.shapes) if k in model
                     and tuple(model[k].shape) != shape]
        if problems:
            raise ValueError("state dict does not fit the model: " + "; ".join(problems))
        chunked = self._chunked(sd)  # checked before any parameter changes
        arrays = [model[k] for k in names]
        xp = get_array_module(self.flats[0])
        for k, group in enumerate(self.groups):
            whole = group.flatten(xp, [xp.asarray(arrays[self.index[id(p)]]) for p in group.params])
            self._chunk(k)[...] = group.owned(whole)
        self.update.refresh()  # before the parameters are made whole from the chunks
        self._refresh()
        self.optimizer.load_state_dict(chunked)

    def _chunked(self, sd: dict) -> dict:
        """A one-device optimizer state dict turned into the shards' (one entry per group)."""
        opt = self.optimizer
        out = {"step_count": sd["step_count"], "lr": sd["lr"]}
        for k, group in enumerate(self.groups):
            index = [self.index[id(p)] for p in group.params]
            for name in opt.buffers:
                present = [f"{name}.{i}" in sd for i in index]
                if all(present):  # the optimizer's own memory: the device's, or the host's
                    xp = get_array_module(self.update.shards[k].data)
                    whole = group.flatten(xp, [to_host(sd[f"{name}.{i}"]) if xp is np
                                               else xp.asarray(sd[f"{name}.{i}"]) for i in index],
                                          opt.state_dtype(group.dtype))
                    out[f"{name}.{k}"] = group.owned(whole)
                elif any(present):
                    raise ValueError(f"optimizer state {name!r} is missing for some parameters "
                                     "of a group and present for others")
            for name in opt.counters:
                values = {sd.get(f"{name}.{i}") for i in index} - {None}
                if len(values) > 1:
                    raise ValueError(f"optimizer counter {name!r} differs within a group")
                if values:
                    out[f"{name}.{k}"] = values.pop()
        return out
