"""ZeRO stage 2: the gradient is split too, reduce-scattered bucket by bucket during backward."""

from __future__ import annotations

from .stage1 import ZeRO1


class ZeRO2(ZeRO1):
    """P_os+g (Rajbhandari et al. 2020, §5.2): as soon as the last gradient of a bucket is
    final, the bucket is packed and its reduce-scatter starts while backward goes on; when it
    is done the rank copies its chunk out and the bucket is dropped. A whole gradient never
    outlives its bucket: a rank holds 4Ψ + 12Ψ/N bytes with Adam in float32, plus the buckets
    in flight and the gradients waiting for theirs.

    Buckets start in order (every rank posts the same collectives in the same sequence), as
    in :class:`~scratchpar.parallel.dp.DataParallel`; a gradient that backward did not reach
    counts as zeros once backward is over.
    """

    def _backward(self, local) -> None:
        self._missing = [len(g.params) for g in self.groups]  # per group: gradients not final
        self._next, self._inflight = 0, []  # the next group to start; (group, handle, bucket)
        with self.tracer.region("backward", "compute"):
            local.backward(on_grad_ready=self._ready)
        self._start(final=True)
        self._drain(wait=True)
        self._sample()

    def _ready(self, leaf) -> None:
        k = self.group_of.get(id(leaf))
        if k is not None:
            self._missing[k] -= 1
            if self._missing[k] == 0:
                self._complete(k)
                self._start(final=False)
        self._drain(wait=False)

    def _complete(self, k: int) -> None:
        """Group k's gradients are all final (stage 3 frees its parameters here)."""

    def _start(self, final: bool) -> None:
        """Start groups in order while they are complete; after backward (``final``), all."""
        while self._next < len(self.groups) and (final or self._missing[self._next] == 0):
            handle = self._pack_and_start(self._next)
            self._inflight.append((self._next, handle, self._buckets[-1]))
            self._next += 1
            self._sample()

    def _drain(self, wait: bool) -> None:
        """Advance every reduction in flight; hand each finished one's chunk (a copy) to the
        update and drop its bucket (``wait``: finish them all)."""
        running = []
        for k, handle, bucket in self._inflight:
            if wait or handle.test():
                self.update.receive(k, handle.wait(), copy=True)
                self._buckets = [b for b in self._buckets if b is not bucket]
            else:
                running.append((k, handle, bucket))
        self._inflight = running

    def _held(self) -> dict[str, list]:
        grads = [s.grad for s in self.update.shards] if not self.update.offloaded else []
        pending = [p.grad for p in self.params]
        return {"parameters": self.flats, "gradients": grads, "buckets": self._buckets + pending}
