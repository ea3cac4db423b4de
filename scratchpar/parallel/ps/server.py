"""A server of the asynchronous family: apply the push, answer the pull (Li et al. 2014, §3.2).

The server keeps one receive posted per worker still present and takes whichever header
arrives first (``wait_any``). A header says a worker finished a step (with a gradient range
if it pushes, and whether it wants the parameters back), asks for the lock, or leaves. Its
strategy's consistency rule decides the rest: whether a clock's pushes wait for every worker's
and become one update (``aggregates``, aggregate.py), and when a pull may be answered
(``ready``). The lock is the locked rule's own (locked.py).
"""

from __future__ import annotations

import numpy as np

from ...optim import guarded_step
from ...trace.tracer import NULL
from .aggregate import HeldClocks
from .protocol import ACQUIRE, HEADER, LEAVE, PULL, PUSH, Header, ProtocolError
from .records import LossLedger, Roster, Versions
from .stats import ServerStats


class Server:
    """Server ``comm.rank`` of the parameter server ``ps``: its range of keys on the host
    (``flat``) and their optimizer, what it keeps of its workers (``roster``, ``versions``,
    ``ledger``), the pushes it holds for their clock (``clocks``) and the pulls it holds for
    the rule (``pending``). ``step()`` serves until every worker still present has finished
    one more clock; ``shutdown()`` serves until every worker has left."""

    def __init__(self, ps):
        self.ps, self.comm, self.s = ps, ps.comm, ps.comm.rank
        self.tracer = self.comm.tracer or NULL
        self.flat, self.optimizer = ps.flat, ps.optimizer  # its range, on the host (roles.py)
        workers = range(ps.servers, self.comm.size)
        self.roster, self.versions = Roster(workers, self.s), Versions(workers)
        self.ledger, self.clocks = LossLedger(), HeldClocks(ps.group, ps.servers)
        self.pending: dict[int, int] = {}  # worker → the clock after which it pulls
        self.served, self.last_norm = 0, 0.0
        self.sends: list = []  # (request, buffer) until the send completes
        self.inbox = {w: self._post(w) for w in workers}
        self.stats = ServerStats(self.comm, self.s, ps.servers)  # busy fractions and bytes
        self.stats.post(self.inbox)

    # -- the loop's protocol ----------------------------------------------------------------------
    def step(self, _batch=None) -> dict:
        """Serve until every worker still present has finished clock k (this server's k-th
        call): ``{"loss"}`` of clock k over the units of every worker's finite step (skipped if
        there was none), ``"units"``, clock k's over every worker, the staleness of the pushes
        applied meanwhile, and each server's busy fraction so far."""
        k = self.served
        self._serve_until(lambda: self.roster.slowest() > k)
        self.served += 1
        self.stats.report(final=False, sends=self.sends)
        loss, skipped, units, overflowed = self.ledger.close(k)
        stale = self.versions.step_staleness() or [0]
        metrics = {"loss": loss, "grad_norm": self.last_norm, "skipped": skipped,
                   "units": units, "staleness_mean": float(np.mean(stale)),
                   "staleness_max": int(max(stale)), "version": self.versions.version,
                   "busy": self.stats.fractions()}
        if overflowed:  # the loss scales' answer, not divergence
            metrics["overflow"] = True
        return metrics

    def shutdown(self) -> dict | None:
        """Serve until every worker has left (and, on server 0, every server has reported).
        Server 0 returns the run's report: pushes, staleness histogram, busy fractions."""
        self._serve_until(lambda: not self.roster.present)
        self.stats.report(final=True, sends=self.sends)
        if self.s == 0:
            self._serve_until(self.stats.all_reported)
        self.comm.wait_all([request for request, _ in self.sends])
        self.sends = []
        if self.s != 0:
            return None
        pushes, counts = sum(self.roster.pushes.values()), self.versions.staleness_histogram
        version = self.versions.version
        mean = sum(k * n for k, n in counts.items()) / max(sum(counts.values()), 1)
        line = (f"parameter servers: {pushes:,} pushes applied, as many as the workers sent, in "
                f"{version:,} updates · staleness mean {mean:.2f}, max {max(counts, default=0)}"
                f" · {self.stats.busy_line()}")
        return {"pushes": pushes, "version": version, "busy": self.stats.fractions(),
                "summary": line, "staleness_histogram": dict(sorted(counts.items())),
                "bytes": [self.stats.bytes[s] for s in sorted(self.stats.bytes)]}

    # -- the message loop -------------------------------------------------------------------------
    def _serve_until(self, done) -> None:
        with self.stats.serving_time():
            while not done():
                keys = list(self.inbox)
                with self.stats.waiting_time():
                    i = self.comm.wait_any([self.inbox[key][1] for key in keys])
                key = keys[i]
                buf, _ = self.inbox.pop(key)
                if isinstance(key, tuple):  # a server's figures (stats.py), not the protocol
                    self.stats.take(key, buf, self.inbox)
                else:
                    self.stats.count(buf.nbytes)
                    self._handle(key, Header.unpack(buf))
            self.sends = [(r, b) for r, b in self.sends if not self.comm.test_all([r])]

    def _post(self, w: int):
        buf = Header.buffer()
        return buf, self.comm.irecv(buf, w, HEADER)

    def _handle(self, w: int, h: Header) -> None:
        """One header: a lock request, a leave, or a finished step; then whatever the
        consistency rule now allows."""
        if h.kind == ACQUIRE:
            self.acquire(w)
        else:
            self.roster.check(w, h)
            (self.leave if h.kind == LEAVE else self.finished)(w, h)
        if h.kind != LEAVE:
            self.inbox[w] = self._post(w)
        self.settle()

    def acquire(self, w: int) -> None:
        """Worker w asks for the lock: only the locked rule has one (locked.py)."""
        raise ProtocolError(f"worker rank {w} asked server {self.s} for a lock, which "
                            f"{type(self.ps).__name__} has not")

    def leave(self, w: int, h: Header) -> None:
        """Worker w is done: its last push, if it holds unpushed steps (Downpour's n_push), is
        applied now; then every push it sent must have been taken."""
        if h.grad:
            self.push(w, h, hold=False)
        self.roster.leave(w, h)

    def finished(self, w: int, h: Header) -> None:
        """Worker w finished step ``h.clock``: its loss, its push, its pull."""
        self.ledger.record(h)
        self.versions.computing(w)
        if h.grad:
            self.push(w, h, hold=self.ps.aggregates(self.ps.offset + h.clock))
        self.roster.clock[w] += 1
        if h.pull:
            self.pending[w] = h.clock

    # -- apply the push, answer the pull ----------------------------------------------------------
    def push(self, w: int, h: Header, hold: bool) -> None:
        """Receive worker w's gradient range: hold it for its clock (sync, SSP), or apply it as
        one update the moment it arrives (Downpour; Dean et al. 2012, §4.1)."""
        grad = np.empty(self.ps.ranges.lengths[self.s], self.flat.dtype)  # (K_s,)
        self.comm.recv(grad, w, PUSH)
        self.stats.count(grad.nbytes)
        read = self.versions.pushed(w)
        self.roster.pushes[w] += 1
        if hold:
            self.clocks.hold(w, grad, h, read)
        else:  # its steps are finite ones alone (worker.py): the guard judges their norm
            self._update(grad, 0.0, h.lr, h.norm, [read])

    def pull(self, w: int) -> None:
        """Answer worker w's pull: the range as it is now, the version w computes on next."""
        copy = self.flat.data.copy()  # later updates must not change a message in flight
        self.sends.append((self.comm.isend(copy, w, PULL), copy))
        self.stats.count(copy.nbytes)
        self.versions.pulled[w] = self.versions.version

    def settle(self) -> None:
        """Apply every clock that all workers present have pushed, then answer every pull the
        consistency rule now allows."""
        slowest = self.roster.slowest()
        for c in self.clocks.complete(slowest):
            self._update(*self.clocks.update(c))
        offset = self.ps.offset
        for w, c in list(self.pending.items()):
            if self.ps.ready(offset + c, offset + slowest):
                del self.pending[w]
                self.pull(w)

    def _update(self, grad, loss: float, lr: float, norm: float, reads: list[int]) -> None:
        """One optimizer step on the range, of the pushes computed on versions ``reads``."""
        self.flat.grad = grad
        self.optimizer.lr = lr  # the pushing worker's step's rate
        with self.tracer.region("update", "compute"):
            metrics = guarded_step(self.optimizer, [self.flat], loss, self.ps.grad_clip,
                                   norm=norm)
        self.last_norm = metrics["grad_norm"]
        self.versions.applied(reads, stepped=not metrics["skipped"])
