"""What the parameter servers measure beside their protocol: each server's busy fraction and bytes.

Every server times its serving (``step`` and ``shutdown``) and its waiting inside it, and counts
the bytes it receives and sends, headers included. The others report theirs to server 0 after
each clock (tag STATS, four float64s), so server 0's metrics and report hold every server's.
These messages are bookkeeping, not the protocol's bytes.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np

from .protocol import STATS


class ServerStats:
    """Server ``s``'s own figures, and on server 0 every server's last report: ``busy[s]``, the
    share of its serving time spent handling messages rather than waiting, and ``bytes[s]``."""

    def __init__(self, comm, s: int, servers: int):
        self.comm, self.s, self.servers = comm, s, servers
        self.serving = self.idle = 0.0  # seconds serving, and waiting while serving
        self.moved = 0  # bytes this server received and sent
        self.busy = dict.fromkeys(range(servers), 0.0)
        self.bytes = dict.fromkeys(range(servers), 0)
        self.finals: set[int] = set()  # servers whose last report has come

    def post(self, inbox: dict) -> None:
        """On server 0: a receive for every other server's next report, keyed ("stats", s)."""
        for s in range(1, self.servers) if self.s == 0 else ():
            self._post(inbox, s)

    def _post(self, inbox: dict, s: int) -> None:
        buf = np.empty(4)  # [server, busy, bytes, final]
        inbox[("stats", s)] = (buf, self.comm.irecv(buf, s, STATS))

    def serving_time(self):
        """Times a stretch of serving (a server's ``step`` or ``shutdown``)."""
        return self._adding("serving")

    def waiting_time(self):
        """Times a wait for the next message, within serving."""
        return self._adding("idle")

    @contextlib.contextmanager
    def _adding(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            setattr(self, name, getattr(self, name) + time.perf_counter() - start)

    def count(self, nbytes: int) -> None:
        """A message of the protocol received or sent."""
        self.moved += int(nbytes)

    def report(self, final: bool, sends: list) -> None:
        """This server's figures so far; sent to server 0 (added to ``sends``) by the others."""
        busy = 1.0 - self.idle / self.serving if self.serving > 0 else 0.0
        self.busy[self.s], self.bytes[self.s] = busy, self.moved
        if self.s != 0:
            report = np.array([self.s, busy, self.moved, float(final)])
            sends.append((self.comm.isend(report, 0, STATS), report))

    def take(self, key, buf, inbox: dict) -> None:
        """On server 0: server s's report arrived; post for its next one unless final."""
        s = key[1]
        self.busy[s], self.bytes[s] = float(buf[1]), int(buf[2])
        if buf[3]:
            self.finals.add(s)
        else:
            self._post(inbox, s)

    def all_reported(self) -> bool:
        """On server 0: every other server's last report has come."""
        return len(self.finals) == self.servers - 1

    def fractions(self) -> list[float]:
        """Each server's busy fraction, rounded, in server order."""
        return [round(self.busy[s], 4) for s in sorted(self.busy)]

    def busy_line(self) -> str:
        """The busy fractions as the run's summary line states them."""
        busy = self.fractions()
        return (f"busy {', '.join(f'{100 * b:.0f}%' for b in busy)} (server"
                f"{' 0' if len(busy) == 1 else f's 0–{len(busy) - 1}'})")
