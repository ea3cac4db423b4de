"""A worker of the asynchronous family: compute on the parameters it holds, push, pull.

Each step, the worker computes its mean gradient on its rows of the global batch (its summed
loss's gradient over their units, as one device divides), adds it to the steps not yet pushed,
and sends every server a header (``protocol.Header``): with the gradient's range when its
strategy says to push (Downpour's n_push), and asking for the parameters back when it says to
pull (n_fetch). In locked mode it first takes every server's
lock, in server order (so no two workers can each hold a lock the other waits for), and the
grants bring the parameters.
"""

from __future__ import annotations

import math
import time

from ...backend import get_array_module
from ...data.shard import shard
from ...optim.clip import grad_norm_array, norm_of
from ...optim.guard import read_scalars
from ...trace.tracer import NULL
from .protocol import ACQUIRE, HEADER, LEAVE, PULL, PUSH, STEP, Header


class Worker:
    """Worker ``comm.rank − S`` of the parameter server ``ps``; its model's parameters are the
    last it pulled."""

    def __init__(self, ps):
        self.ps, self.comm = ps, ps.comm
        self.tracer = self.comm.tracer or NULL
        self.index = self.comm.rank - ps.servers
        self.clock = self.pushes = 0
        self.unpushed = None  # Σ of mean gradients since the last push, one array per parameter

    def step(self, global_batch) -> dict:
        """One step on this worker's rows: ``{"loss", "grad_norm", "skipped", "wait_s"}``, the
        loss and norm its own, ``wait_s`` the time spent waiting for the lock or the pull."""
        ps = self.ps
        batch = shard(global_batch, self.index, ps.workers)
        waited = self._lock() if ps.locked else 0.0
        with self.tracer.region("forward+backward", "compute"):
            mean, units, norm, finite = self._gradient(batch)
        push = self.unpushed is not None and ps.pushes_at(ps.offset + self.clock)
        pull = not ps.locked and ps.fetches_at(ps.offset + self.clock)
        verdict = ps._judged({"loss": mean, "grad_norm": norm, "skipped": not finite})
        header = Header(STEP, self.clock, mean if finite else math.nan, units, ps.optimizer.lr,
                        pull=pull, overflow="overflow" in verdict)
        waited += self._send(header, push, pull)
        self.clock += 1
        return {**verdict, "wait_s": waited, "units": units}

    def shutdown(self) -> None:
        """Leave: push what is not pushed yet, with the count of pushes, to every server."""
        self._send(Header(LEAVE, self.clock, lr=self.ps.optimizer.lr),
                   push=self.unpushed is not None, pull=False)

    def _gradient(self, batch) -> tuple[float, float, float, bool]:
        """Backpropagate the summed loss over this worker's units, divide by them, and add
        the mean gradient to the unpushed sum unless the loss or gradient is not finite:
        (loss, units, ‖g‖, finite)."""
        ps = self.ps
        units = float(ps.objective.count(batch))
        if not units:  # no rows, or only padding: nothing to learn from
            return 0.0, 0.0, 0.0, True
        loss = ps._mean_gradient(batch)
        mean, norm = read_scalars(loss, grad_norm_array(ps.params))
        finite = math.isfinite(mean) and math.isfinite(norm)
        if ps.scaler is not None:
            norm /= ps.scaler.scale  # ‖S·∇‖ / S
        xp = get_array_module(loss)
        grads = ps._pushed([xp.zeros_like(p.data) if p.grad is None else p.grad
                            for p in ps.params])
        if finite and self.unpushed is None:
            self.unpushed = [xp.ascontiguousarray(g) for g in grads]
        elif finite:
            for total, g in zip(self.unpushed, grads):
                total += g
        return mean, units, norm, finite

    def _send(self, header: Header, push: bool, pull: bool) -> float:
        """Send every server the header (and the unpushed gradient's range); receive the
        parameters if pulling. Returns the seconds spent waiting."""
        ps, sends, pulled = self.ps, [], []
        if push:
            self.pushes += 1
            header.grad, header.norm = True, float(norm_of(self.unpushed))
        header.pushes = self.pushes
        packed = header.pack()
        for s in range(ps.servers):
            sends.append(self.comm.isend(packed, s, HEADER))
            if push:
                sends.append(self.comm.isend(ps.ranges.gather(self.unpushed, s), s, PUSH))
        if push:
            self.unpushed = None
        if pull:
            xp = get_array_module(ps.params[0].data)
            pulled = [xp.empty(n, ps.wire) for n in ps.ranges.lengths]
            sends += [self.comm.irecv(buf, s, PULL) for s, buf in enumerate(pulled)]
        start = time.perf_counter()
        with self.tracer.region("pull" if pull else "push" if push else "tick", "comm"):
            self.comm.wait_all(sends)
        waited = time.perf_counter() - start
        for s, buf in enumerate(pulled):
            ps.ranges.scatter(buf, [p.data for p in ps.params], s)
        return waited

    def _lock(self) -> float:
        """Take every server's lock in server order; each grant is that server's range."""
        ps, start = self.ps, time.perf_counter()
        xp = get_array_module(ps.params[0].data)
        packed = Header(ACQUIRE, self.clock).pack()
        for s in range(ps.servers):
            buf = xp.empty(ps.ranges.lengths[s], ps.wire)
            with self.tracer.region(f"lock {s}", "comm"):
                self.comm.wait_all([self.comm.isend(packed, s, HEADER),
                                    self.comm.irecv(buf, s, PULL)])
            ps.ranges.scatter(buf, [p.data for p in ps.params], s)
        return time.perf_counter() - start

