"""The synchronous parameter server: the spec of the family, equal to one device.

Ranks 0 … S−1 are servers, the rest W workers. Each step, worker w backpropagates its summed
loss over the n_w units of its rows of the global batch (``shard``; the loop draws only those,
``rows``) and divides by n_w, as one device divides by its batch's, and pushes, to each server
s, its mean gradient's keys in s's range and the pair [L_w, n_w]. Server s waits for every
worker, weighs each push by n_w/N with N = Σ n_w, sums in worker order (``weighted_mean``),
and steps its range's optimizer. The servers agree on the global gradient norm for clipping in
one all-reduce among themselves. Then every worker pulls every range back, and server 0 sends
the step's metrics (Dean et al. 2012, §4.1; Li et al. 2014, §3.2: push and pull of key ranges).
A server keeps its range on the host, a CPU master whatever device the workers compute on.
"""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module
from ...comm import collectives
from ...data.shard import shard
from ...optim import guarded_step
from .protocol import HEADER, METRICS, PULL, PUSH, weighted_mean
from .roles import Roles


class SyncParameterServer(Roles):
    """``step(global_batch) -> metrics`` on every rank: a server round on servers, a worker's
    push and pull on workers; every rank returns server 0's metrics. ``make_optimizer(params)``
    builds a server's optimizer over its one flat range (any elementwise optimizer then equals
    one device's)."""

    def step(self, global_batch) -> dict:
        metrics = self._serve() if self.is_server else self._work(global_batch)
        return self._reported(metrics, global_batch)

    # -- a worker -------------------------------------------------------------------------------
    def _work(self, global_batch) -> dict:
        batch = shard(global_batch, self.comm.rank - self.servers, self.workers)
        n = self.objective.count(batch)
        mean = self._mean_gradient(batch)  # L_w, the mean over its n_w units
        xp = get_array_module(mean)
        grads = self._pushed([xp.zeros_like(p.data) if p.grad is None
                              else xp.ascontiguousarray(p.grad) for p in self.params])
        header = xp.stack([xp.asarray(mean, dtype="float64"),
                           xp.asarray(n, dtype="float64")])  # [L_w, n_w]
        sends = [self.comm.isend(self.ranges.gather(grads, s), s, PUSH) for s in
                 range(self.servers)] + [self.comm.isend(header, s, HEADER)
                                         for s in range(self.servers)]
        pulled = [xp.empty(k, self.wire) for k in self.ranges.lengths]
        metrics = np.empty(4)  # [loss, grad_norm, skipped, N] from server 0
        self.comm.wait_all(sends + [self.comm.irecv(buf, s, PULL) for s, buf in enumerate(pulled)]
                           + [self.comm.irecv(metrics, 0, METRICS)])
        for s, buf in enumerate(pulled):
            self.ranges.scatter(buf, [p.data for p in self.params], s)
        return {**self._judged({"loss": float(metrics[0]), "grad_norm": float(metrics[1]),
                                "skipped": bool(metrics[2])}), "units": float(metrics[3])}

    # -- a server -------------------------------------------------------------------------------
    def _serve(self) -> dict:
        s, workers = self.comm.rank, range(self.servers, self.comm.size)
        pushes = {w: np.empty(self.ranges.lengths[s], self.flat.dtype) for w in workers}
        headers = {w: np.empty(2) for w in workers}
        self.comm.wait_all([self.comm.irecv(pushes[w], w, PUSH) for w in workers]
                           + [self.comm.irecv(headers[w], w, HEADER) for w in workers])
        units = [headers[w][1] for w in workers]
        self.flat.grad, loss = weighted_mean([pushes[w] for w in workers],  # (K_s,): one device's
                                             [headers[w][0] for w in workers], units)
        squares = np.array([(self.flat.grad.astype("float64") ** 2).sum()])
        collectives.all_reduce_(self.group, squares)  # ‖g‖² over every server's range
        metrics = guarded_step(self.optimizer, [self.flat], loss, self.grad_clip,
                               norm=np.sqrt(squares[0]))
        sends = [self.comm.isend(self.flat.data, w, PULL) for w in workers]
        if s == 0:
            report = np.array([metrics["loss"], metrics["grad_norm"], float(metrics["skipped"]),
                               sum(units)])
            sends += [self.comm.isend(report, w, METRICS) for w in workers]
        self.comm.wait_all(sends)
        return {**self._judged(metrics), "units": sum(units)}
