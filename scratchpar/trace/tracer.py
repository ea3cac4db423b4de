"""Per-rank regions (name, category, start, end, bytes) on a clock aligned across ranks."""

from __future__ import annotations

import contextlib
import time
from typing import NamedTuple


class Event(NamedTuple):
    """One region: ``start`` and ``end`` in ns since the tracer's origin, ``bytes`` moved."""

    name: str
    cat: str  # "compute", "comm", …: a lane of the timeline
    start: int
    end: int
    bytes: int = 0


class Tracer:
    """Records this rank's regions; :meth:`align` puts every rank's zero at a shared barrier."""

    enabled = True

    def __init__(self, rank: int = 0):
        self.rank = rank
        self.events: list[Event] = []
        self.origin_ns = time.perf_counter_ns()  # this rank's perf_counter at time zero

    def align(self, barrier) -> None:
        """Call ``barrier()`` (every rank leaves it at about the same moment) and start the
        clock there: ranks' times are then comparable, to within the barrier's release skew."""
        barrier()
        self.origin_ns = time.perf_counter_ns()

    def now(self) -> int:
        """Nanoseconds since the origin."""
        return time.perf_counter_ns() - self.origin_ns

    def record(self, name: str, cat: str, start: int, end: int, nbytes: int = 0) -> None:
        self.events.append(Event(name, cat, start, end, nbytes))

    def region(self, name: str, cat: str, nbytes: int = 0) -> Region:
        """``with tracer.region("backward", "compute"):`` records the block as one event."""
        return Region(self, name, cat, nbytes)

    def export(self) -> dict:
        """Picklable and JSON-ready: this rank, its clock origin and its events."""
        return {"rank": self.rank, "origin_ns": self.origin_ns,
                "events": [e._asdict() for e in self.events]}


class Region:
    """The context manager of :meth:`Tracer.region` (an exception still ends the region)."""

    __slots__ = ("tracer", "name", "cat", "nbytes", "start")

    def __init__(self, tracer: Tracer, name: str, cat: str, nbytes: int):
        self.tracer, self.name, self.cat, self.nbytes = tracer, name, cat, nbytes

    def __enter__(self) -> Region:
        self.start = self.tracer.now()
        return self

    def __exit__(self, *exc) -> None:
        self.tracer.record(self.name, self.cat, self.start, self.tracer.now(), self.nbytes)


class NullTracer:
    """Tracing off: every call does nothing, and ``region`` hands back one shared no-op."""

    enabled = False
    _nothing = contextlib.nullcontext()  # stateless, so one instance serves every region

    def region(self, name: str, cat: str, nbytes: int = 0):
        return self._nothing


NULL = NullTracer()
