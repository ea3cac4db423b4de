"""What a server keeps of its workers: who is present at which clock, which version of its range
each computed on (so the staleness of every push), and each clock's loss.

Staleness is counted in updates: a push computed on version v of the range and applied when the
range is at version u is u − v updates stale (Ho et al. 2013, §2; Dean et al. 2012, §4.1).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from .protocol import Header, ProtocolError


class Roster:
    """The workers present, and per worker its clock (steps finished) and its pushes taken
    (applied, or held for their clock)."""

    def __init__(self, workers, s: int):
        self.s = s  # the server keeping it, for its errors
        self.clock = dict.fromkeys(workers, 0)
        self.pushes = dict.fromkeys(workers, 0)
        self.present = set(workers)

    def check(self, w: int, h: Header) -> None:
        """A worker's headers come clock after clock."""
        if h.clock != self.clock[w]:
            raise ProtocolError(f"worker rank {w} sent clock {h.clock}; server {self.s} "
                                f"expected {self.clock[w]}")

    def leave(self, w: int, h: Header) -> None:
        """Worker w leaves, having sent ``h.pushes`` pushes: every one of them was taken."""
        if self.pushes[w] != h.pushes:
            raise ProtocolError(f"server {self.s} applied {self.pushes[w]} pushes of worker "
                                f"rank {w}, which sent {h.pushes}: an update was lost")
        self.present.discard(w)

    def slowest(self) -> float:
        """The clock of the slowest worker present (∞ once all have left)."""
        return min((self.clock[w] for w in self.present), default=math.inf)


class Versions:
    """The range's ``version`` (its updates applied; a skipped one does not count), the version
    each worker last pulled, the one its unpushed steps were computed on, and the staleness of
    every push applied: over the run (``staleness_histogram``) and since the last step's end."""

    def __init__(self, workers):
        self.version = 0
        self.pulled = dict.fromkeys(workers, 0)
        self.read: dict[int, int] = {}
        self.staleness_histogram = Counter()  # staleness → pushes applied at it (not SSP's τ)
        self.recent: list[int] = []  # the staleness of the pushes applied since the step's end

    def computing(self, w: int) -> None:
        """Worker w finished a step: the first since its last push was computed on the version
        it last pulled."""
        self.read.setdefault(w, self.pulled[w])

    def pushed(self, w: int) -> int:
        """Worker w pushed its unpushed steps: the version the oldest was computed on."""
        return self.read.pop(w)

    def applied(self, reads: list[int], stepped: bool) -> None:
        """An update of the pushes computed on versions ``reads``: each is u − v stale."""
        stale = [self.version - read for read in reads]
        self.version += stepped
        self.staleness_histogram.update(stale)
        self.recent += stale

    def step_staleness(self) -> list[int]:
        """The staleness of the pushes applied since the last call."""
        recent, self.recent = self.recent, []
        return recent


class LossLedger:
    """Per clock, the loss over the units of every finite step (Σ L·n and Σ n), the units of
    every step (Σ n read), and the steps whose 16-bit gradient overflowed."""

    def __init__(self):
        self.sums = defaultdict(lambda: [0.0, 0.0, 0.0])  # clock → [Σ L·n, Σ n, Σ n read]
        self.overflows = Counter()  # clock → its steps whose 16-bit gradient overflowed

    def record(self, h: Header) -> None:
        """A worker's step of clock ``h.clock``: its loss counts if it is finite."""
        sums = self.sums[h.clock]
        if h.units and math.isfinite(h.mean):  # a finite step's loss (protocol.Header)
            sums[0] += h.mean * h.units
            sums[1] += h.units
        sums[2] += h.units
        self.overflows[h.clock] += h.overflow

    def close(self, clock: int) -> tuple[float, bool, float, bool]:
        """Clock ``clock``'s loss (NaN where no step was finite), whether it was skipped, its
        units, and whether the skip was the loss scales' answer to an overflow rather than
        divergence."""
        total, units, read = self.sums.pop(clock, (0.0, 0.0, 0.0))
        overflowed = bool(self.overflows.pop(clock, 0)) and not units
        return total / units if units else math.nan, not units, read, overflowed
