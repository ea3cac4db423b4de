"""Asynchronous EASGD: the centre on a master rank, each worker exchanging with it every τ of its
own steps while the others go on (Zhang et al. 2015, Algorithm 1)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from ...backend import get_array_module
from ...comm.chunks import bounds
from ...data.shard import Part, shard
from ...optim import guarded_step
from ...optim.guard import refused
from ..description import Description, Message, replicated
from ..ps.protocol import HEADER, LEAVE, STEP, Header, ProtocolError
from ..strategy import whole_model
from .master import MasterAndWorkers
from .worker import own_verdict

WEIGHTS, DIFFERENCE = 2, 3  # tags beside the header's


class AsyncEASGD(MasterAndWorkers):
    """Rank 0 is the master and holds the centre x̃ on the host. Ranks 1 … W are workers, each
    on its rows of the global batch, the only rows it draws (:meth:`rows`; the master draws
    none). A worker at its step t computes ∇fⁱ(xⁱ), its summed loss over its units, and, when
    t mod τ = 0, sends xⁱ. The master answers in arrival order with d = xⁱ − x̃ and moves
    x̃ ← x̃ + α d (eq. 4, one worker at a time). The worker moves xⁱ ← xⁱ − α d (eq. 3's
    elastic term, from the same x̃), then takes its optimizer's step. Every step the worker
    sends the master a header (its loss, its units, and whether an exchange follows), so the
    master's step t ends once every worker still present has finished its step t. ``shutdown()``
    ends the protocol (each worker leaves, the master serves until all have)."""

    mode = "async"

    def __init__(self, model, make_optimizer, objective, mesh, /, *, rho: float, tau: int,
                 grad_clip: float = 0.0):
        size = whole_model(mesh, type(self).__name__).size
        if size < 2 or not rho >= 0 or tau < 1:
            raise ValueError(f"asynchronous EASGD needs a master and a worker (2 ranks or more), "
                             f"ρ ≥ 0 and τ ≥ 1; got {size} rank(s), ρ = {rho}, τ = {tau}")
        super().__init__(model, make_optimizer, objective, mesh, rho=rho, grad_clip=grad_clip,
                         name="easgd")
        self.tau, self.exchanges = tau, 0
        if self.comm.rank == 0:
            self.clock = dict.fromkeys(range(1, size), 0)
            self.served = dict.fromkeys(self.clock, 0)  # exchanges per worker
            self.overflows = Counter()  # clock → its steps whose 16-bit gradient overflowed
            self.losses: dict[int, list[float]] = {}  # clock → [Σ L·n, Σ n] applied, Σ n all
            self.inbox = {w: self._post(w) for w in self.clock}

    @classmethod
    def describe(cls, shape, world: int, *, tau: int = 4) -> Description:
        """A worker's model, gradient and optimizer state, and the flat copy of xⁱ it sends
        with the difference it gets back (the master's centre, its received copy and the
        difference weigh no more, on the host). Per step: a header to the master, and every
        τ of its steps xⁱ out and xⁱ − x̃ back (Algorithm 1), as the masters are: fp32 in
        mixed precision."""
        p = shape.widened().bytes
        return Description(replicated(shape, buffers=2 * p),
                           (Message("header", "world", Header.buffer().nbytes, 1),
                            Message("send", "world", p, 1 / tau),
                            Message("recv", "world", p, 1 / tau)), chunk=shape.largest,
                           arrays=shape.stepped)

    def rows(self, batch_size: int) -> tuple[int, int]:
        """A worker's rows alone, ``bounds(b, W)[i]`` for worker i; the master's: none."""
        if self.comm.rank == 0:
            return 0, 0
        return bounds(batch_size, self.workers)[self.comm.rank - 1]

    def _post(self, w: int):
        buf = Header.buffer()
        return buf, self.comm.irecv(buf, w, HEADER)

    def step(self, global_batch) -> dict:
        """``{"loss", "grad_norm", "skipped"}``: a worker's own, the master's step t over
        every worker's units. Handed a :class:`~scratchpar.data.shard.Part`, also ``"units"``:
        a worker's own nⁱ (it cannot know the others'), the master's N over every worker."""
        t, self.steps = self.steps, self.steps + 1
        if self.comm.rank == 0:
            metrics, units = self._serve_until(t)
        else:
            metrics, units = self._work(global_batch, t)
        if isinstance(global_batch, Part):
            metrics["units"] = units
        return metrics

    # -- a worker ---------------------------------------------------------------------------------
    def _work(self, global_batch, t: int) -> tuple[dict, float]:
        xp = get_array_module(self.params[0].data)
        batch = shard(global_batch, self.comm.rank - 1, self.workers)
        self.optimizer.zero_grad()
        mean, norm, finite, units = own_verdict(self, batch)
        refusal = None if finite else refused(self.optimizer, mean, norm)  # halves its scale
        exchange = finite and t % self.tau == 0
        self.exchanges += exchange
        header = Header(STEP, t, mean if finite else math.nan, units, self.optimizer.lr, norm,
                        grad=exchange, pushes=self.exchanges,
                        overflow=bool(refusal and refusal.get("overflow")))
        requests = [self.comm.isend(header.pack(), 0, HEADER)]
        if exchange:
            weights = self.optimizer.weights()  # xⁱ: fp32 masters in mixed precision
            flat = self.layout.flatten(xp, weights)  # (K,)
            diff = xp.empty_like(flat)
            requests += [self.comm.isend(flat, 0, WEIGHTS), self.comm.irecv(diff, 0, DIFFERENCE)]
        self.comm.wait_all(requests)
        if refusal:
            return refusal, units
        if exchange:
            alpha = self.optimizer.lr * self.rho
            for x, d in zip(weights, self.layout.views(diff)):
                x -= alpha * d  # eq. 3's elastic term
            self.optimizer.round_params()
        return guarded_step(self.optimizer, self.params, mean, self.grad_clip, norm), units

    def _leave(self) -> None:
        self.comm.wait_all([self.comm.isend(Header(LEAVE, self.steps,
                                                   pushes=self.exchanges).pack(), 0, HEADER)])

    # -- the master -------------------------------------------------------------------------------
    def _serve_until(self, t: float) -> tuple[dict, float]:
        """Serve headers and exchanges in arrival order until every worker still present has
        finished step t: ``{"loss"}`` of step t over the units of every worker whose step was
        applied, and the units of all of them."""
        while any(clock <= t for clock in self.clock.values()):
            workers = list(self.inbox)
            i = self.comm.wait_any([self.inbox[w][1] for w in workers])
            w = workers[i]
            h = Header.unpack(self.inbox.pop(w)[0])
            if h.kind == LEAVE:
                if self.served[w] != h.pushes:
                    raise ProtocolError(f"the master served {self.served[w]} exchanges of "
                                        f"worker rank {w}, which made {h.pushes}: one was lost")
                del self.clock[w]
                continue
            if h.grad:
                self._exchange(w, h.lr * self.rho)
            self.overflows[h.clock] += h.overflow
            total = self.losses.setdefault(h.clock, [0.0, 0.0, 0.0])
            if math.isfinite(h.mean):  # the worker applied its step
                total[0] += h.mean * h.units
                total[1] += h.units
            total[2] += h.units
            self.clock[w] = h.clock + 1
            self.inbox[w] = self._post(w)
        loss, units, drawn = self.losses.pop(t, (0.0, 0.0, 0.0))
        metrics = {"loss": loss / units if units else math.nan, "grad_norm": math.nan,
                   "skipped": not units}
        if self.overflows.pop(t, 0) and not units:  # the loss scales' answer, not divergence
            metrics["overflow"] = True
        return metrics, drawn

    def _exchange(self, w: int, alpha: float) -> None:
        """Worker w's xⁱ in; d = xⁱ − x̃ out; x̃ ← x̃ + α d (eq. 4 with one worker)."""
        theirs = np.empty(self.layout.n, self.layout.dtype)  # (K,)
        self.comm.recv(theirs, w, WEIGHTS)
        diff = np.empty_like(theirs)  # (K,)
        for c, x, d in zip(self.centre, self.layout.views(theirs), self.layout.views(diff)):
            np.subtract(x, c, out=d)  # xⁱ − x̃
            c += alpha * d
        self.comm.send(diff, w, DIFFERENCE)
        self.exchanges += 1
        self.served[w] += 1

    def shutdown(self) -> None:
        """Workers leave; the master serves until every one has."""
        if self.comm.rank == 0:
            self._serve_until(math.inf)
        else:
            self._leave()
