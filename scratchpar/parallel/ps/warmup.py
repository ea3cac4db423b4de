"""Synchronous, then asynchronous: DistBelief's warm start (Dean et al. 2012, §4.1)."""

from __future__ import annotations

from .downpour import AsyncParameterServer


class SyncThenAsync(AsyncParameterServer):
    """The first ``warmup`` steps as the synchronous server takes them (every worker's push of a
    clock, one update, every worker waits for it), the rest as Downpour (each push applied as it
    arrives, no waiting; pushes every n_push steps and pulls every n_fetch). The last
    synchronous update is in every worker's parameters before any asynchronous step begins.
    Dean et al. warm-start with a single replica. The synchronous steps are one device's."""

    def __init__(self, model, make_optimizer, objective, mesh, /, *, warmup: int,
                 n_push: int = 1, n_fetch: int = 1, servers: int = 1, grad_clip: float = 0.0):
        if warmup < 0:
            raise ValueError(f"the synchronous warm-up must be ≥ 0 steps, got {warmup}")
        self.warmup = warmup
        super().__init__(model, make_optimizer, objective, mesh, n_push=n_push, n_fetch=n_fetch,
                         servers=servers, grad_clip=grad_clip)

    def aggregates(self, clock: int) -> bool:
        return clock < self.warmup

    def ready(self, clock: int, slowest: float) -> bool:
        return clock >= self.warmup or slowest > clock

    def pushes_at(self, step: int) -> bool:
        return step < self.warmup or super().pushes_at(step)

    def fetches_at(self, step: int) -> bool:
        return step < self.warmup or super().fetches_at(step)
