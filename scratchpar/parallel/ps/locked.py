"""The locked parameter server: one worker at a time reads, updates and writes w."""

from __future__ import annotations

from collections import deque

from .arrival_order import ArrivalOrderParameterServer
from .protocol import Header
from .server import Server


class LockServer(Server):
    """A server with a lock: the workers that ask for it queue in arrival order, the holder's
    finished step frees it, and a free lock goes to the next in the queue, the grant being the
    range (the worker's pull)."""

    def __init__(self, ps):
        super().__init__(ps)
        self.queue, self.holder = deque(), None

    def acquire(self, w: int) -> None:
        self.queue.append(w)

    def finished(self, w: int, h: Header) -> None:
        super().finished(w, h)
        if self.holder == w:  # its step under the lock is done: the next one may go
            self.holder = None

    def settle(self) -> None:
        super().settle()
        if self.holder is None and self.queue:
            self.holder = self.queue.popleft()
            self.pull(self.holder)


class LockedParameterServer(ArrivalOrderParameterServer):
    """A worker takes every server's lock (in server order), and the grants bring it the
    latest parameters. It computes its gradient, and its push is applied and frees the lock for
    the next worker in arrival order. Every push is applied exactly once, on the parameters it
    was computed from (staleness 0). The run is serial SGD over the workers' batches in the
    order the lock went round, and the workers' compute never overlaps: sequential consistency
    (Li et al. 2014, §3.5: tasks run one by one, with a single thread's result)."""

    locked = True
    server_role = LockServer
