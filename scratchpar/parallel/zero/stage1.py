"""ZeRO stage 1: the optimizer state is split among the ranks; parameters and gradients are not."""

from __future__ import annotations

from ...autograd import GradReady
from ...comm import collectives
from ...comm.buckets import Buckets
from .base import ZeRO
from .flat import FlatGroup


class ZeRO1(ZeRO):
    """P_os (Rajbhandari et al. 2020, §5.1): every rank keeps the whole parameters and, until
    the update, the whole gradient. The optimizer state is each rank's 1/N. Per bucket:

        g[n] on every rank ─reduce-scatter→ gᵣ[n/N] ─update→ θᵣ[n/N] ─all-gather→ θ[n]

    The buckets are DP's (reverse definition order, ``bucket_bytes`` each), each one a flat
    vector that the parameters are views of, so the all-gather writes them in place. With Adam
    in float32 a rank holds 4Ψ + 4Ψ + 8Ψ/N bytes (parameters, gradient, optimizer state).
    """

    stage = 1

    def _plan(self, bucket_bytes: int) -> list[FlatGroup]:
        order = self.params[::-1]  # the order backward finishes the gradients in, roughly
        plan = Buckets([p.data for p in order], bucket_bytes)
        return [FlatGroup([order[j] for j in members], self.comm.size, self.comm.rank)
                for members in plan.members]

    def _store(self, group):
        flat = group.flatten(self.xp, [p.data for p in group.params])  # (n,)
        group.bind(flat)
        return flat

    def _backward(self, local) -> None:
        """Backward; then each bucket packed and reduce-scattered, in order (stage 2: while
        backward runs, as it completes them), and the rank's chunk of each taken."""
        self.overlap.begin()
        with self.tracer.region("backward", "compute"):
            local.backward(hooks=GradReady(self._grad_ready))
        self.overlap.finish()

    def _grad_ready(self, leaf) -> None:
        """Nothing: every bucket starts after backward."""

    def _start_bucket(self, k: int):
        """Group k's gradients into a new flat bucket (n,) (a gradient backward did not reach
        as zeros), its reduce-scatter started, and the gradients it holds dropped."""
        group = self.groups[k]
        bucket = self._buckets[k] = group.flatten(self.xp, [p.grad for p in group.params])
        handle = self._reduce_scatter_start(self.comm, bucket)  # the bucket beside its gradients
        for p in group.params:
            p.grad = None
        return handle

    def _finished(self, k: int, chunk) -> None:
        """The rank's chunk stays a view of its bucket until the update."""
        self.update.receive(k, chunk, copy=False)

    def _refresh(self) -> None:
        """Every bucket's chunks all-gathered, in place in the parameters. With offload each
        chunk is copied up just before its bucket's all-gather starts."""
        handles = []
        for k, flat in enumerate(self.flats):
            self.update.upload(k)
            handles.append(collectives.all_gather_start(self.comm, flat))
        for handle in handles:
            handle.wait()

    def _held(self) -> dict[str, list]:
        grads = [p.grad for p in self.params]
        return {"parameters": self.flats, "gradients": [*self._buckets.values(), *grads]}
