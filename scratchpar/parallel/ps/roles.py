"""A parameter server's ranks and roles: servers 0 … S−1 own key ranges on the host, the rest
work; the part every variant, the synchronous spec included, starts from."""

from __future__ import annotations

from ...backend import to_host
from ...nn.module import Parameter
from ..strategy import Strategy
from .ranges import KeyRanges
from .state import ServerState


class Roles(ServerState, Strategy):
    """Splits ``comm`` into S servers and W workers. A server holds its range of the flat
    parameters on the host (``flat``, as seed 001's CPU master does, whatever device the
    workers compute on) and ``make_optimizer([flat])``; a worker's optimizer only carries the
    learning rate the training loop sets. The protocol runs on its own dup of ``comm``, and the
    servers (or workers) have a communicator of their own (``group``)."""

    def __init__(self, model, make_optimizer, loss_fn, count_fn, comm, servers: int = 1,
                 grad_clip: float = 0.0):
        if not 1 <= servers < comm.size:
            raise ValueError(f"a parameter server needs 1 ≤ servers < ranks: {servers} servers "
                             f"on {comm.size} ranks leave no worker")
        # its own dup of the world: its tags never meet another subsystem's
        super().__init__(model, None, loss_fn, count_fn, comm.dup(name="ps"), grad_clip)
        self.servers, self.workers = servers, comm.size - servers
        self.ranges = KeyRanges([p.size for p in self.params], servers)
        self.is_server = comm.rank < servers
        self.group = comm.split(0 if self.is_server else 1, name="ps servers" if self.is_server
                                else "ps workers")
        if self.is_server:
            host = [to_host(p.data) for p in self.params]
            self.flat = Parameter(self.ranges.gather(host, comm.rank))  # (K_s,)
            self.optimizer = make_optimizer([self.flat])
        else:
            self.optimizer = make_optimizer(self.params)  # the loop sets its lr; never steps

    def close(self) -> None:
        """Collective: free the communicators this strategy made."""
        self.comm.free()
        self.group.free()
