"""A server of the asynchronous family: its key range, served to every worker in arrival order.

The server keeps one receive posted per worker still present and takes whichever header
arrives first (``wait_any``). A header says a worker finished a step (with a gradient range
if it pushes, and whether it wants the parameters back), asks for the lock, or leaves. Its
strategy's consistency rule decides the rest: whether a clock's pushes wait for every worker's
and become one update (``aggregates``), and when a pull may be answered (``ready``).

Staleness is counted in updates: a push computed on version v of the range and applied when the
range is at version u is u − v updates stale (Ho et al. 2013, §2; Dean et al. 2012, §4.1).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict, deque

import numpy as np

from ...comm import collectives
from ...optim import guarded_step
from ...trace.tracer import NULL
from .protocol import (
    ACQUIRE,
    HEADER,
    LEAVE,
    PULL,
    PUSH,
    Header,
    ProtocolError,
    weighted_mean,
)
from .stats import ServerStats


class Server:
    """Server ``comm.rank`` of the parameter server ``ps``: its range of keys on the host
    (``flat``), their optimizer, and per worker a clock (steps it finished), the version it last
    pulled, and its pushes applied. ``step()`` serves until every worker still present has
    finished one more clock; ``shutdown()`` serves until every worker has left."""

    def __init__(self, ps):
        self.ps, self.comm, self.s = ps, ps.comm, ps.comm.rank
        self.tracer = self.comm.tracer or NULL
        self.flat, self.optimizer = ps.flat, ps.optimizer  # its range, on the host (roles.py)
        workers = range(ps.servers, self.comm.size)
        self.clock = dict.fromkeys(workers, 0)
        self.held = dict.fromkeys(workers, 0)  # the version each worker last pulled
        self.pushes = dict.fromkeys(workers, 0)  # its pushes applied (or held for their clock)
        self.active = set(workers)
        self.read: dict[int, int] = {}  # the version its unpushed steps were computed on
        self.pending: dict[int, int] = {}  # its pull, waiting on the consistency rule
        self.clocked = defaultdict(dict)  # clock → {worker: (grad, header, read)}, to aggregate
        self.losses = defaultdict(lambda: [0.0, 0.0, 0.0])  # clock → [Σ L·n, Σ n, Σ n read]
        self.overflows = Counter()  # clock → its steps whose 16-bit gradient overflowed
        self.waiting, self.holder = deque(), None  # the lock (locked mode)
        self.version, self.served, self.last_norm = 0, 0, 0.0
        self.stale_counts = Counter()  # staleness → updates of it over the run (not SSP's τ)
        self.recent: list[int] = []  # the staleness of this step's updates
        self.sends: list = []  # (request, buffer) until the send completes
        self.inbox = {w: self._post(w) for w in workers}
        self.stats = ServerStats(self.comm, self.s, ps.servers)  # busy fractions and bytes
        self.stats.post(self.inbox)

    def _post(self, w: int):
        buf = Header.buffer()
        return buf, self.comm.irecv(buf, w, HEADER)

    # -- the loop's protocol ----------------------------------------------------------------------
    def step(self, _batch=None) -> dict:
        """Serve until every worker still present has finished clock k (this server's k-th
        call): ``{"loss"}`` of clock k over the units of every worker's finite step (skipped if
        there was none), ``"units"``, clock k's over every worker, the staleness of the updates
        applied meanwhile, and each server's busy fraction so far."""
        k = self.served
        self.recent = []
        self._serve_until(lambda: all(self.clock[w] > k for w in self.active))
        self.served += 1
        self.stats.report(final=False, sends=self.sends)
        total, units, read = self.losses.pop(k, (0.0, 0.0, 0.0))
        stale = self.recent or [0]
        metrics = {"loss": total / units if units else math.nan, "grad_norm": self.last_norm,
                   "skipped": not units, "units": read, "staleness_mean": float(np.mean(stale)),
                   "staleness_max": int(max(stale)), "version": self.version,
                   "busy": self.stats.fractions()}
        if self.overflows.pop(k, 0) and not units:  # the loss scales' answer, not divergence
            metrics["overflow"] = True
        return metrics

    def shutdown(self) -> dict | None:
        """Serve until every worker has left (and, on server 0, every server has reported).
        Server 0 returns the run's report: pushes, staleness histogram, busy fractions."""
        self._serve_until(lambda: not self.active)
        self.stats.report(final=True, sends=self.sends)
        if self.s == 0:
            self._serve_until(self.stats.all_reported)
        self.comm.wait_all([request for request, _ in self.sends])
        self.sends = []
        if self.s != 0:
            return None
        pushes, counts = sum(self.pushes.values()), self.stale_counts
        mean = sum(k * n for k, n in counts.items()) / max(sum(counts.values()), 1)
        most = max(counts, default=0)
        line = (f"parameter servers: {pushes:,} pushes applied, as many as the workers sent, in "
                f"{self.version:,} updates · staleness mean {mean:.2f}, max {most} · "
                f"{self.stats.busy_line()}")
        return {"pushes": pushes, "version": self.version, "busy": self.stats.fractions(),
                "summary": line, "staleness": dict(sorted(counts.items())),
                "bytes": [self.stats.bytes[s] for s in sorted(self.stats.bytes)]}

    # -- serving ----------------------------------------------------------------------------------
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
            self._purge()

    def _handle(self, w: int, h: Header) -> None:
        if h.kind != ACQUIRE and h.clock != self.clock[w]:
            raise ProtocolError(f"worker rank {w} sent clock {h.clock}; server {self.s} "
                                f"expected {self.clock[w]}")
        if h.kind == ACQUIRE:
            self.waiting.append(w)
        elif h.kind == LEAVE:
            if h.grad:  # the steps since its last push (Downpour's n_push)
                self._take(w, h, aggregate=False)
            if self.pushes[w] != h.pushes:
                raise ProtocolError(f"server {self.s} applied {self.pushes[w]} pushes of worker "
                                    f"rank {w}, which sent {h.pushes}: an update was lost")
            self.active.discard(w)
        else:
            if h.units and math.isfinite(h.mean):  # a finite step's loss (protocol.Header)
                self.losses[h.clock][0] += h.mean * h.units
                self.losses[h.clock][1] += h.units
            self.losses[h.clock][2] += h.units
            self.overflows[h.clock] += h.overflow
            self.read.setdefault(w, self.held[w])  # the version this step was computed on
            if h.grad:
                self._take(w, h, aggregate=self.ps.aggregates(self.ps.offset + h.clock))
            self.clock[w] += 1
            if h.pull:
                self.pending[w] = h.clock
            if self.holder == w:  # its step under the lock is done: the next one may go
                self.holder = None
        if h.kind != LEAVE:
            self.inbox[w] = self._post(w)
        self._settle()

    def _take(self, w: int, h: Header, aggregate: bool) -> None:
        """Receive worker w's gradient range; apply it now or hold it for its clock."""
        grad = np.empty(self.ps.ranges.lengths[self.s], self.flat.dtype)  # (K_s,)
        self.comm.recv(grad, w, PUSH)
        self.stats.count(grad.nbytes)
        read = self.read.pop(w)
        self.pushes[w] += 1
        if aggregate:
            self.clocked[h.clock][w] = (grad, h, read)
        else:  # its steps are finite ones alone (worker.py): the guard judges their norm
            self._update(grad, 0.0, h.lr, h.norm, [self.version - read])

    def _settle(self) -> None:
        """Apply every clock that all workers present have pushed, answer every pull the
        consistency rule now allows, and grant the lock if it is free."""
        slowest = min((self.clock[w] for w in self.active), default=math.inf)
        for c in sorted(self.clocked):
            if c >= slowest:
                break
            self._update_clock(c)
        for w, c in list(self.pending.items()):
            if self.ps.ready(self.ps.offset + c, self.ps.offset + slowest):
                del self.pending[w]
                self._send_params(w)
        if self.holder is None and self.waiting:
            self.holder = self.waiting.popleft()
            self._send_params(self.holder)

    def _update_clock(self, c: int) -> None:
        """Clock c's pushes as one update, in worker order; the servers agree on its norm."""
        held = self.clocked.pop(c)
        pushes = [held[w] for w in sorted(held)]
        grad, loss = weighted_mean([g for g, _, _ in pushes], [h.mean for _, h, _ in pushes],
                             [h.units for _, h, _ in pushes])
        squares = np.array([(grad.astype("float64") ** 2).sum()])
        if self.ps.servers > 1:  # every server completes the clocks in the same order
            collectives.all_reduce_(self.ps.group, squares)
        self._update(grad, loss, pushes[0][1].lr, math.sqrt(squares[0]),
                     [self.version - read for _, _, read in pushes])

    def _update(self, grad, loss: float, lr: float, norm: float, stale: list[int]) -> None:
        self.flat.grad = grad
        self.optimizer.lr = lr  # the pushing worker's step's rate
        with self.tracer.region("update", "compute"):
            metrics = guarded_step(self.optimizer, [self.flat], loss, self.ps.grad_clip,
                                   norm=norm)
        self.version += not metrics["skipped"]
        self.last_norm = metrics["grad_norm"]
        self.stale_counts.update(stale)
        self.recent += stale

    def _send_params(self, w: int) -> None:
        copy = self.flat.data.copy()  # later updates must not change a message in flight
        self.sends.append((self.comm.isend(copy, w, PULL), copy))
        self.stats.count(copy.nbytes)
        self.held[w] = self.version

    def _purge(self) -> None:
        self.sends = [(r, b) for r, b in self.sends if not self.comm.test_all([r])]
