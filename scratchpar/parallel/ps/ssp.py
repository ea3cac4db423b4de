"""Stale synchronous parallel: a worker runs at most τ clocks ahead of the slowest (Ho et al.
2013; the bounded delay τ of Li et al. 2014, §3.5)."""

from __future__ import annotations

from .arrival_order import ArrivalOrderParameterServer


class SSPParameterServer(ArrivalOrderParameterServer):
    """Bounded staleness. The server holds the pushes of clock c until every worker present has
    pushed c, then applies them as one update in worker order, as the synchronous server does.
    A worker that finished clock c may start clock c + 1 once the slowest has finished
    c + 1 − τ clocks (Ho et al. 2013, §3: reads see every update older than c − τ), so the
    gradients in an update are at most τ updates stale. τ = 0 is the synchronous server, update
    for update. The far end of the spectrum, where nobody waits and each push is applied the
    moment it arrives, is :class:`~.downpour.AsyncParameterServer`."""

    def __init__(self, model, make_optimizer, objective, mesh, /, *, staleness: int,
                 servers: int = 1, grad_clip: float = 0.0):
        if staleness < 0:
            raise ValueError(f"the staleness bound τ must be ≥ 0, got {staleness}")
        self.staleness = staleness  # τ; what the servers measure is their ``staleness_histogram``
        super().__init__(model, make_optimizer, objective, mesh, servers=servers,
                         grad_clip=grad_clip)

    def aggregates(self, clock: int) -> bool:
        return True

    def ready(self, clock: int, slowest: float) -> bool:
        return slowest >= clock + 1 - self.staleness
