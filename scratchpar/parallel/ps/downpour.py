"""Downpour SGD: the server applies each push the moment it arrives (Dean et al. 2012, §4.1)."""

from __future__ import annotations

from .arrival_order import ArrivalOrderParameterServer


class AsyncParameterServer(ArrivalOrderParameterServer):
    """Asynchronous: no worker ever waits for another. Each push is one optimizer step on the
    pushing worker's mean gradient, computed on whatever version it last pulled. A worker
    pushes the sum of its mean gradients every ``n_push`` steps and pulls every ``n_fetch``
    (DistBelief's n_push and n_fetch; 1 and 1 make every step push and pull)."""

    def __init__(self, model, make_optimizer, objective, mesh, /, *, n_push: int = 1,
                 n_fetch: int = 1, servers: int = 1, grad_clip: float = 0.0):
        if n_push < 1 or n_fetch < 1:
            raise ValueError(f"n_push and n_fetch must be ≥ 1, got {n_push} and {n_fetch}")
        self.n_push, self.n_fetch = n_push, n_fetch
        super().__init__(model, make_optimizer, objective, mesh, servers=servers,
                         grad_clip=grad_clip)

    def pushes_at(self, step: int) -> bool:
        return (step + 1) % self.n_push == 0

    def fetches_at(self, step: int) -> bool:
        return (step + 1) % self.n_fetch == 0
