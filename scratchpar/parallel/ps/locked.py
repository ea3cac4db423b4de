"""The locked parameter server: one worker at a time reads, updates and writes w."""

from __future__ import annotations

from .arrival_order import ArrivalOrderParameterServer


class LockedParameterServer(ArrivalOrderParameterServer):
    """A worker takes every server's lock (in server order), and the grants bring it the
    latest parameters. It computes its gradient, and its push is applied and frees the lock for
    the next worker in arrival order. Every push is applied exactly once, on the parameters it
    was computed from (staleness 0). The run is serial SGD over the workers' batches in the
    order the lock went round, and the workers' compute never overlaps: sequential consistency
    (Li et al. 2014, §3.5: tasks run one by one, with a single thread's result)."""

    locked = True
