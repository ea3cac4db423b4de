"""PipeDream's asynchronous pipeline: an update after every micro-batch, weights stashed so that
each micro-batch's backward sees the weights its forward saw."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

from ...comm import collectives
from ...data.shard import Part, shard
from ...optim import guarded_step
from ...optim.guard import read_scalars
from ..description import Message
from .runtime import Runtime
from .strategy import Pipeline


class StashingRuntime(Runtime):
    """Weight stashing (Narayanan et al. 2019, PipeDream, §3.3): a forward runs on a copy of
    the chunk's current weights, and the micro-batch's backward runs on that copy again, so it
    uses the same version however many updates came in between: the graph the forward built
    holds the copy, and a recomputed layer (``--recompute``) rebuilds its graph from it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.chunk_params = [chunk.parameters() for chunk in self.stage.chunks]
        self.versions: dict = {}  # (mb, chunk) → its stashed weights, one array per parameter

    def forward(self, a, x):
        stashed = self.versions[a.mb, a.chunk] = [p.data.copy()
                                                  for p in self.chunk_params[a.chunk]]
        with self._on(a.chunk, stashed):
            return super().forward(a, x)

    def backward(self, a, root, weights=None):
        with self._on(a.chunk, self.versions.pop((a.mb, a.chunk))):
            super().backward(a, root, weights)

    @contextmanager
    def _on(self, chunk: int, version: list):
        """The chunk's parameters hold ``version`` meanwhile; updates change the live arrays,
        which they hold again after."""
        params = self.chunk_params[chunk]
        live = [p.data for p in params]
        for p, w in zip(params, version):
            p.data = w
        try:
            yield
        finally:
            for p, data in zip(params, live):
                p.data = data


class PipeDream(Pipeline):
    """PipeDream asynchronous 1F1B (``schedules.pipedream``, the default): no flush inside a
    batch. Stage s updates after each backward, w ← w − η·∇f(w₁^{(t−n+1)}, …, w_n^{(t)})
    (Narayanan et al. 2019, §3.3), where stage s's forward of micro-batch i saw
    max(0, i − (p − s − 1)) of this batch's updates.

    Each micro-batch is one of PipeDream's minibatches: its gradient is divided by its own
    units (over all replicas), summed over dp replicas of the stage, clipped to this stage's
    own norm, and applied by this stage's optimizer alone. A non-finite update is skipped on
    the stage that sees it. The pipeline drains at the end of each training-loop step (one
    flush per m micro-batches), so larger m keeps it fuller. A stage reads its replica's rows
    alone (:meth:`rows`), so the replicas sum each micro-batch's units before the first. Shared
    parameters would be updated at different times on their stages, so tied embeddings are
    refused (config validation).
    """

    scores_in_layout = False  # its runtime stashes weights per forward: rank 0 scores whole

    runtime_class = StashingRuntime
    default_schedule = "pipedream"

    @classmethod
    def describe(cls, shape, world: int, pp: int = 1, m: int = 1, v: int = 1,
                 rows: int = 0, bucket_bytes: int = 1 << 20,
                 tp: int = 1):
        """The flushing pipeline's figures, with the weights stashed for the micro-batches in
        flight (up to p versions on the first stage: Narayanan et al. 2019, §3.3), the
        replicas' sum after every micro-batch's backward instead of once, and before the first
        their micro-batches' units."""
        base = Pipeline.describe(shape, world, pp, m, v, rows, bucket_bytes, tp)
        stage = base.holds["parameters"]
        sends = tuple(replace(msg, count=msg.count * m) if msg.axis == "dp" else msg
                      for msg in base.sends)
        if world // (pp * tp) > 1:
            sends += (Message("all-reduce", "dp", 8 * m, 1),)
        return replace(base, holds={**base.holds, "parameters": stage * (1 + pp)},
                       sends=sends)

    def step(self, global_batch) -> dict:
        """One flush of m micro-batches on ``global_batch``, or on this replica's rows of it
        (a :class:`~scratchpar.data.shard.Part`, then ``"units"``: N, every replica's)."""
        m, dp = self.m, self.mesh.dp
        replica = shard(global_batch, self.mesh.dp_comm.rank, dp)
        micro = [shard(replica, i, m) for i in range(m)]
        self.mb_units = self.xp.zeros(m, "float64")  # micro-batch i's units over every replica
        for i, batch in enumerate(micro):
            self.mb_units[i] = self.objective.count(batch)
        if dp > 1:  # the replicas' i-th micro-batches make PipeDream's i-th minibatch
            collectives.all_reduce_(self.mesh.dp_comm, self.mb_units)
        mine = [self.objective.split(batch) for batch in micro]
        self.skips = 0
        self.optimizer.zero_grad()
        losses = self.runtime.run(self.actions, mine, self._update)
        totals = self.xp.zeros(2, "float64")  # [Σ loss of this replica, updates skipped]
        for loss in losses:
            totals[0] += loss.data
        totals[1] = self.skips
        loss_sum, skips, *units = read_scalars(*collectives.all_reduce_(self.mesh.world, totals),
                                               *self.mb_units)  # one copy to the host
        units = sum(units)
        metrics = {"loss": loss_sum / max(units, 1.0), "skipped": skips > 0,
                   "skipped_updates": int(skips)}
        if isinstance(global_batch, Part):
            metrics["units"] = units
        return metrics

    def _update(self, mb) -> None:
        """``STEP mb``: this micro-batch's mean gradient, over replicas, applied at once."""
        with self.tracer.region("optimizer", "compute"):
            self._sum_over_replicas()
            scale = 1.0 / self.xp.maximum(self.mb_units[mb], 1.0)
            for p in self.params:
                p.grad *= scale
            loss = self.runtime.losses[mb].data * scale if mb in self.runtime.losses else 0.0
            result = guarded_step(self.optimizer, self.params, loss, self.grad_clip)
            self.skips += result["skipped"]
            self.optimizer.zero_grad()
