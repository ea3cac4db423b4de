"""Data parallelism with its device work captured as a CUDA graph (``kernels/graph.py``).

A rank's step is the same as :class:`~scratchpar.parallel.dp.DataParallel`'s, the same buckets
summed in the same order, so the same bits. What differs is where the host is: the graph
replays this rank's forward, its backward and the packing of every gradient into its bucket as
one launch, and the messages follow it. A message cannot go in a graph here: an MPI library
that is not CUDA-aware is handed device memory through the host, a copy the host waits for,
which no graph may hold (``docs/devices.md``, "Staging"). So the buckets' all-reduces start
when backward has ended, not during it, as Li et al. (2020, §3.2) overlap them; what the graph
saves is the host's launch of every kernel, which is what a GPU's small step is made of.
"""

from __future__ import annotations

from ..comm import collectives
from ..kernels.graph import Replayed
from ..nn.layers import dropout_generator
from .dp import DataParallel


class CapturedDataParallel(DataParallel):
    """:class:`DataParallel` whose forward, backward and bucket packing replay as a CUDA graph
    once the shard's shapes are fixed; the all-reduces (loss totals, then the buckets in
    order), the 1/N, the guard and the update stay outside it. Accumulating steps
    (:meth:`no_sync`) and attached probes run the uncaptured step."""

    def __init__(self, model, make_optimizer, objective, mesh, /, *,
                 bucket_bytes: int = 1 << 20, grad_clip: float = 0.0, reduce_dtype=None):
        super().__init__(model, make_optimizer, objective, mesh, bucket_bytes=bucket_bytes,
                         grad_clip=grad_clip, reduce_dtype=reduce_dtype)
        self.replayed = Replayed(self._device_work, dropout_generator(self.model))

    def step(self, global_batch) -> dict:
        if not self.syncing or self._pending is not None or self.probes.attached:
            return super().step(global_batch)
        with self.tracer.region("replay", "compute"):  # forward, backward, packing
            totals = self.replay(self.replayed, self.my_rows(global_batch))
        handle = collectives.all_reduce_start(self.comm, totals)  # (2,) [Σ Lᵣ, Σ nᵣ]
        for bucket in self.plan.start_all(self.comm):
            bucket.wait()
        for j, p in enumerate(self.order):
            p.grad = self.plan.view(j)  # the reduced gradient, in its bucket
        return self._update(handle)

    def _device_work(self, *batch):
        """What the graph holds: this rank's summed loss and units as (2,) float64 [Lᵣ, nᵣ],
        its backward from no gradient, and every gradient packed into its bucket (one alone in
        its bucket too: its buffer is the captured array the message reads)."""
        self.optimizer.zero_grad()
        loss, n = self.sum_loss(batch if len(batch) > 1 else batch[0])
        totals = self._totals(loss, n)
        loss.backward()
        self.plan.pack([p.grad for p in self.order])  # a gradient backward missed: zeros
        return totals
