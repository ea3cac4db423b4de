"""ZeRO stage 2: the gradient is split too, reduce-scattered bucket by bucket during backward."""

from __future__ import annotations

from .stage1 import ZeRO1


class ZeRO2(ZeRO1):
    """P_os+g (Rajbhandari et al. 2020, §5.2): as soon as the last gradient of a bucket is
    final, the bucket is packed and its reduce-scatter starts while backward goes on. When it
    is done the rank copies its chunk out and the bucket is dropped. A whole gradient never
    outlives its bucket: a rank holds 4Ψ + 12Ψ/N bytes with Adam in float32, plus the buckets
    in flight and the gradients waiting for theirs.

    Buckets start in order (every rank posts the same collectives in the same sequence), as
    in :class:`~scratchpar.parallel.dp.DataParallel`: both are scheduled by
    :class:`~scratchpar.comm.overlap.Overlap`. A gradient that backward did not reach counts
    as zeros once backward is over.
    """

    stage = 2

    def _grad_ready(self, leaf) -> None:
        """A gradient is final: its bucket may start, and the reductions in flight advance."""
        self.overlap.ready(self.group_of.get(id(leaf)))

    def _finished(self, k: int, chunk) -> None:
        """The rank's chunk copied out to the update, and the bucket dropped."""
        self.update.receive(k, chunk, copy=True)
        del self._buckets[k]

    def _held(self) -> dict[str, list]:
        grads = [s.grad for s in self.update.shards] if not self.update.offloaded else []
        pending = [p.grad for p in self.params]
        return {"parameters": self.flats, "gradients": grads,
                "buckets": [*self._buckets.values(), *pending]}
