"""The parameter servers that serve each message as it arrives: roles, step protocol, clock.

A variant is a small subclass that states its consistency rule through four hooks: whether
pushes of a clock are held until every worker's has come and then applied as one update
(``aggregates``), when a pull made after clock c may be answered (``ready``), how often a
worker pushes and pulls (``pushes_at``, ``fetches_at``), and whether workers take the
servers' lock around their whole step (``locked``, with the server that keeps the lock,
``server_role``). The servers (``server.py``) and workers (``worker.py``) carry out the
protocol; :class:`~.sync.SyncParameterServer` stays beside them as the lockstep spec.
"""

from __future__ import annotations

from .roles import Roles
from .server import Server
from .worker import Worker


class ArrivalOrderParameterServer(Roles):
    """Ranks 0 … S−1 serve, the rest work. ``step(global_batch) -> metrics`` on every rank:
    serve one clock on a server, one step on a worker. ``shutdown()`` ends the protocol on
    every rank (workers leave, servers serve until all have) and returns server 0's report of
    the run. ``make_optimizer(params)`` builds a server's optimizer over its flat range.
    Handed its rows alone, a server's step reports its clock's units over every worker, a
    worker's its own (no worker hears of the others' steps)."""

    locked = False  # workers hold every server's lock around their step (locked.py)
    server_role = Server  # what a server rank runs (locked.py adds the lock)
    lockstep = False  # ranks do not agree on each step's verdict: one rank's error is alone

    def __init__(self, model, make_optimizer, objective, mesh, /, *, servers: int = 1,
                 grad_clip: float = 0.0):
        super().__init__(model, make_optimizer, objective, mesh, servers=servers,
                         grad_clip=grad_clip)
        self.offset = 0  # the clock this run started at (a resumed run's step)
        self.role = self.server_role(self) if self.is_server else Worker(self)

    # -- the consistency rule: overridden by each variant -----------------------------------------
    def aggregates(self, clock: int) -> bool:
        """Whether the pushes of ``clock`` wait for every worker's, then one update."""
        return False

    def ready(self, clock: int, slowest: float) -> bool:
        """Whether a pull made after clock ``clock`` may be answered, when the slowest worker
        present has finished ``slowest`` clocks."""
        return True

    def pushes_at(self, step: int) -> bool:
        """Whether a worker pushes after (absolute) step ``step``."""
        return True

    def fetches_at(self, step: int) -> bool:
        """Whether a worker pulls after (absolute) step ``step``."""
        return True

    # -- the strategy protocol --------------------------------------------------------------------
    def step(self, global_batch) -> dict:
        return self._reported(self.role.step(global_batch), global_batch)

    def shutdown(self) -> dict | None:
        return self.role.shutdown()

    def extras(self) -> dict:
        return {"ps": {"clock": self.offset + self.role.served}}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.load_extras(lambda part: state.get(part, {}))

    def load_extras(self, scalars) -> None:
        self.offset = int(scalars("ps").get("clock", 0))
