"""Synchronous data parallelism: each rank's shard gradient, summed over ranks, one update."""

from __future__ import annotations

import contextlib

from ..autograd import GradReady
from ..comm import collectives
from ..comm.buckets import Buckets
from ..comm.chunks import bounds
from ..comm.overlap import Overlap
from ..data.shard import Part, rows, shard
from ..nn.unfilled import check_same_draws, is_unfilled, module_of
from ..optim import guarded_step
from ..optim.guard import read_scalars
from .description import TOTALS, Description, Message, bucketed, replicated
from .pieces import replica_pieces
from .strategy import Strategy, whole_model


class DataParallelNaive(Strategy):
    """The specification: after backward, one blocking all-reduce per parameter.

    Rank r holds rows ``bounds(b, p)[r]`` of the global batch. With Lᵣ its summed loss and nᵣ its
    units (samples or tokens), the full-batch mean gradient is ∇(Σᵣ Lᵣ)/N with N = Σᵣ nᵣ: every
    rank backpropagates its Lᵣ, the gradients are summed over ranks and scaled by 1/N. This is
    exact for unequal shards (a rank may hold 0 rows), where averaging per-rank means is not.

    Its step names every probe moment (``probe.py``): the gradient noise scale
    (:class:`~.noise.NoiseProbe`) and the memory ledger (:class:`~.ledger.Ledger`) attach.

    ``reduce_dtype``: the dtype gradients are summed over ranks in, where not their own (a
    16-bit model's gradients in fp32: twice the bytes, no rounding in the sum); the reduced
    gradient stays in it for the update.
    """

    moments = frozenset({"shard", "gradient", "forward", "moment", "report"})
    splits_sequences = False  # whether a dp × cp mesh is its own (ZeRO's)

    def __init__(self, model, make_optimizer, objective, mesh, /, *, grad_clip: float = 0.0,
                 reduce_dtype=None):
        super().__init__(model, make_optimizer, objective, mesh, grad_clip=grad_clip)
        comm = whole_model(mesh, type(self).__name__, self.splits_sequences)
        self.reduce_dtype = reduce_dtype
        self.xp = module_of(self.params)
        if self.draws_parts:  # each rank draws its own blocks of one model
            check_same_draws(comm, self.params)
        for p in self.params:  # every replica starts from rank 0's parameters
            if not is_unfilled(p.data):
                collectives.broadcast_(comm, p.data)
        self._pending = None  # (2,) [Σ Lᵣ, Σ nᵣ] of micro-batches not yet reduced (no_sync)
        self._handed_part = False  # this step's batch was a Part: report its units

    @classmethod
    def describe(cls, shape, world: int, wide: bool = False) -> Description:
        """Every replica holds one device's model, gradient and optimizer state, and the
        collectives' scratch (at most one copy of the gradient; in fp32 where ``wide``, a
        16-bit gradient summed in fp32). After backward: one all-reduce per parameter over
        the dp ranks, exposed, and one of [Σ L, Σ n]."""
        sent = shape.widened() if wide else shape
        per = -(-sent.bytes // sent.count)  # the mean parameter's
        return Description(replicated(shape, buffers=sent.bytes),
                           (Message("all-reduce", "dp", per, sent.count),
                            Message("all-reduce", "dp", TOTALS, 1)), chunk=shape.largest,
                           arrays=shape.stepped)

    def rows(self, batch_size: int) -> tuple[int, int]:
        """This rank's rows alone (its replica's, under cp): the others' are never drawn
        here."""
        return bounds(batch_size, self.mesh.dp)[self.mesh.dp_comm.rank]

    def step(self, global_batch) -> dict:
        """One synchronous step on ``global_batch``: ``{"loss": global mean loss, …}``."""
        with self.tracer.region("forward", "compute"):
            totals, local = self._forward(global_batch)
        with self.tracer.region("backward", "compute"):
            local.backward()
        return self._update(self._reduce_grads(totals))

    def _forward(self, global_batch):
        """This rank's summed loss, with Σ loss and Σ units (float64) all-reduce started."""
        loss, n = self.local_loss(global_batch)
        totals = self._totals(loss, n)
        self._pending = None
        handle = collectives.all_reduce_start(self.comm, totals)
        self.probes.forward(loss, self.params)
        return handle, loss

    def _totals(self, loss, n):
        """(2,) float64 [Lᵣ, nᵣ] plus the micro-batches not yet reduced, built on the device:
        nothing waits for the loss before it is reduced."""
        totals = self.xp.zeros(2, "float64") if self._pending is None else self._pending
        totals[0] += loss.data
        totals[1] += n
        return totals

    def local_loss(self, global_batch):
        """This rank's summed loss Lᵣ (a Tensor) and unit count nᵣ."""
        if self._pending is None:
            self.optimizer.zero_grad()
        batch = self.my_rows(global_batch)
        loss, units = self.sum_loss(batch)
        self.probes.shard(rows(batch), units)
        return loss, units

    def my_rows(self, global_batch):
        """This rank's rows of ``global_batch``, or the rows it was handed alone (a
        :class:`~scratchpar.data.shard.Part`, noted for :meth:`_count`)."""
        self._handed_part = isinstance(global_batch, Part)
        return shard(global_batch, self.mesh.dp_comm.rank, self.mesh.dp)

    def _reduce_grads(self, totals):
        for p in self.params:
            grad = self._grad_or_zeros(p)
            self.probes.gradient(grad)
            p.grad = collectives.all_reduce_(self.comm, grad)
        return totals

    def _count(self, metrics: dict, n) -> None:
        """Handed only this rank's rows (:meth:`rows`), the step reports N, the units of every
        rank's: the loop that drew them could not count the others' (read after the guard's
        wait, so no second one)."""
        if self._handed_part:
            metrics["units"] = float(n)

    def _grad_or_zeros(self, p):
        """A parameter this backward did not reach still takes part: its gradient counts as 0.
        In ``reduce_dtype``, where one is set."""
        grad = self.xp.zeros_like(p.data) if p.grad is None else self.xp.ascontiguousarray(p.grad)
        return grad if self.reduce_dtype is None else grad.astype(self.reduce_dtype, copy=False)

    def _update(self, totals) -> dict:
        """Scale Σ gradients by 1/N, clip the (now global, identical) gradient, step. The loss
        and the gradient are the reduced ones, so every rank skips a non-finite step alike. Both
        stay on the device until the guard reads them together: the step's one wait."""
        loss_sum, n = totals.wait()  # Σᵣ Lᵣ and N, 0-d
        with self.tracer.region("optimizer", "compute"):
            scale = 1.0 / self.xp.maximum(n, 1.0)
            for p in self.params:
                p.grad *= scale
            metrics = guarded_step(self.optimizer, self.params, loss_sum * scale, self.grad_clip)
        self._count(metrics, n)
        metrics.update(self.probes.report(metrics))
        self.probes.moment()
        return metrics

    def pieces(self) -> tuple[list, dict]:
        """Every replica holds the whole state, so each rank writes a near-equal share of its
        arrays, all ranks at once (:func:`~.pieces.shared_out`)."""
        return replica_pieces(self.model, self.optimizer, self.comm)

    def holdings(self) -> dict[str, list]:
        """What this rank holds now, by part, for a :class:`~.ledger.Ledger`."""
        return {"parameters": [p.data for p in self.params],
                "gradients": [p.grad for p in self.params],
                "optimizer": [v for s in self.optimizer.state for v in s.values()
                              if hasattr(v, "nbytes")],
                "scratch": self.optimizer.work_arrays()}


class DataParallel(DataParallelNaive):
    """Bucketed and overlapped: a bucket's all-reduce starts during backward (Li et al. 2020).

    Buckets are planned over the parameters in reverse definition order, the order in which
    backward roughly finishes their gradients. When the last gradient of bucket k is final, the
    buckets up to k that are complete are packed and started, always in bucket order, so every
    rank posts the same collectives in the same sequence. Each later gradient also advances the
    ones in flight (:class:`~scratchpar.comm.overlap.Overlap`, which ZeRO's stages share). The
    sum and the 1/N scaling are those of :class:`DataParallelNaive`.

    No gradient is copied more than once: a bucket holding a single array (any array larger
    than ``bucket_bytes``) is reduced in place in the gradient itself, and after the reduction
    the other gradients become views of their bucket, like PyTorch's ``gradient_as_bucket_view``.
    """

    def __init__(self, model, make_optimizer, objective, mesh, /, *,
                 bucket_bytes: int = 1 << 20, grad_clip: float = 0.0, reduce_dtype=None):
        super().__init__(model, make_optimizer, objective, mesh, grad_clip=grad_clip,
                         reduce_dtype=reduce_dtype)
        self.order = self.params[::-1]
        self.plan = Buckets([p.data for p in self.order], bucket_bytes, reduce_dtype)
        self.index = {id(p): j for j, p in enumerate(self.order)}
        self.overlap = Overlap([len(m) for m in self.plan.members], self._start_bucket)
        self.syncing = True

    @classmethod
    def describe(cls, shape, world: int, bucket_bytes: int = 1 << 20,
                 wide: bool = False) -> Description:
        """As :class:`DataParallelNaive`, with a bucket copy of the gradient beside it (fp32
        buckets where ``wide``). The buckets' all-reduces run behind backward (Li et al. 2020,
        §3.2)."""
        sent = shape.widened() if wide else shape
        return Description(replicated(shape, buffers=shape.bytes + sent.bytes),
                           (bucketed(sent, bucket_bytes, "all-reduce", "dp", "backward"),
                            Message("all-reduce", "dp", TOTALS, 1, "backward")),
                           chunk=shape.largest, arrays=shape.stepped)

    def holdings(self) -> dict[str, list]:
        """:class:`DataParallelNaive`'s, and the buckets kept from the last step (gradients,
        views of them after a step, are counted as gradients)."""
        return {**super().holdings(), "buckets": self.plan.allocated()}

    @contextlib.contextmanager
    def no_sync(self):
        """Steps inside only accumulate gradients locally; the next step outside reduces all."""
        self.syncing = False
        try:
            yield
        finally:
            self.syncing = True

    def step(self, global_batch) -> dict:
        if not self.syncing:
            return self._accumulate(global_batch)
        with self.tracer.region("forward", "compute"):
            totals, local = self._forward(global_batch)
        self._totals_handle, self._in_place = totals, set()
        self.overlap.begin()
        with self.tracer.region("backward", "compute"):
            local.backward(hooks=GradReady(self._ready))
        self.overlap.finish()
        for j, p in enumerate(self.order):
            if j not in self._in_place:
                p.grad = self.plan.view(j)  # valid until the next step packs this bucket again
        return self._update(totals)

    def _accumulate(self, global_batch) -> dict:
        """Backward on this rank's shard, no communication; returns this rank's own mean loss."""
        with self.tracer.region("forward", "compute"):
            loss, n = self.local_loss(global_batch)
        with self.tracer.region("backward", "compute"):
            loss.backward()
        self._pending = self._totals(loss, n)
        loss_sum, units = read_scalars(loss.data, n)  # one wait; n may be a 0-d device array
        return {"loss": loss_sum / max(units, 1.0)}

    def _ready(self, leaf) -> None:
        """A gradient is final: its bucket may start; the collectives in flight, and the loss
        totals' all-reduce, advance."""
        j = self.index.get(id(leaf))
        self.overlap.ready(None if j is None else self.plan.slots[j].bucket)
        self._totals_handle.test()
        self.probes.moment()

    def _start_bucket(self, k: int):
        """Start bucket k's all-reduce: in place in a gradient alone in its bucket, else packed
        (a gradient backward did not reach packs as zeros)."""
        members = self.plan.members[k]
        alone = self.order[members[0]] if len(members) == 1 else None
        if alone is not None and alone.grad is not None:  # its own bucket: reduce in place
            alone.grad = self._grad_or_zeros(alone)
            self._in_place.add(members[0])
            self.probes.gradient(alone.grad)
            return collectives.all_reduce_start(self.comm, alone.grad)
        self.plan.pack([p.grad for p in self.order], bucket=k)
        self.probes.gradient(self.plan.buffer(k))
        return self.plan.start(self.comm, k)
