"""Round-robin EASGD: a CPU master serves G workers in turn (the round-robin scheme of Zhang et
al. 2015, §4, on their eqs. 3–4)."""

from __future__ import annotations

import math

import numpy as np

from ...backend import get_array_module, to_host
from ...optim import guarded_step
from ...optim.guard import refused
from ..description import Description, Message, replicated
from ..strategy import whole_model
from .master import MasterAndWorkers
from .worker import own_verdict

CENTRE, SAMPLES, WEIGHTS, REPORT = 1, 2, 3, 4  # tags; SAMPLES + k carries the batch's k-th array


class RoundRobinEASGD(MasterAndWorkers):
    """Rank 0 is the master: it holds the centre W̄ on the host (NumPy, whatever device the
    workers use) and, at step t, picks worker j = t mod G (rank 1 + j), sends it the step's
    samples and W̄ₜ, and takes its weights Wᵗʲ back. Worker j computes its gradient at Wᵗʲ (its
    summed loss over the batch's units), moves by eq. 3, Wʲ ← Wᵗʲ − ηρ (Wᵗʲ − W̄ₜ) − η ∇f(Wᵗʲ)
    (elastic term, then its optimizer's step), and the master by eq. 4 with one worker,
    W̄ₜ₊₁ = W̄ₜ + ηρ (Wᵗʲ − W̄ₜ). The other workers wait for their turn (their metrics: their last
    turn's, marked ``idle``, which the loop's count of bad steps passes over), so every step is
    one worker's: a sequential algorithm that an emulation on one process reproduces bit for
    bit. The centre and the weights travel end to end, one message each: a master that waited
    out a worker's compute polls with naps, and would answer each array's rendezvous up to a
    nap late. The master reads the whole batch, and a worker shapes what it receives from its
    own copy: every rank is handed all of it (:meth:`rows` is ``None``)."""

    mode = "round-robin"

    def __init__(self, model, make_optimizer, objective, mesh, /, *, rho: float,
                 grad_clip: float = 0.0):
        size = whole_model(mesh, type(self).__name__).size
        if size < 2 or not rho >= 0:
            raise ValueError(f"round-robin EASGD needs a master and a worker (2 ranks or more) "
                             f"and ρ ≥ 0; got {size} rank(s) and ρ = {rho}")
        super().__init__(model, make_optimizer, objective, mesh, rho=rho, grad_clip=grad_clip,
                         name="easgd round-robin")
        self.last = {"loss": math.nan, "grad_norm": math.nan, "skipped": False}

    @classmethod
    def describe(cls, shape, world: int) -> Description:
        """A worker's model, gradient and optimizer state, with the centre W̄ₜ it receives and
        its weights Wᵗʲ kept to send (the master's centre and the weights it receives weigh
        no more, on the host). Each step the master sends one worker W̄ₜ (with the step's
        samples) and takes its weights back: one worker's exchange per step, as the masters
        are (fp32 in mixed precision)."""
        p = shape.widened().bytes
        return Description(replicated(shape, buffers=2 * p),
                           (Message("send", "world", p, 1), Message("recv", "world", p, 1),
                            Message("report", "world", 40, 1)), chunk=shape.largest,
                           arrays=shape.stepped)

    def step(self, batch) -> dict:
        t, self.steps = self.steps, self.steps + 1
        turn = 1 + t % self.workers  # rank of worker j = t mod G
        if self.comm.rank == 0:
            return self._serve(batch, turn)
        return self._work(batch) if self.comm.rank == turn else {**self.last, "idle": True}

    def _serve(self, batch, turn: int) -> dict:
        arrays = batch if isinstance(batch, tuple) else (batch,)
        sends = [self.comm.isend(np.ascontiguousarray(to_host(a)), turn, SAMPLES + 1 + k)
                 for k, a in enumerate(arrays)]  # the master hands out the samples
        sends.append(self.comm.isend(self.layout.flatten(np, self.centre), turn, CENTRE))
        weights = np.empty(self.layout.n, self.layout.dtype)  # Wᵗʲ end to end (K,)
        report = np.empty(5)  # [loss, units, ‖g‖, finite, overflowed]
        self.comm.wait_all(sends + [self.comm.irecv(weights, turn, WEIGHTS),
                                    self.comm.irecv(report, turn, REPORT)])
        alpha = self.optimizer.lr * self.rho
        if report[3]:
            for c, w in zip(self.centre, self.layout.views(weights)):
                c += alpha * (w - c)  # eq. 4, one worker: W̄ₜ₊₁ = W̄ₜ + ηρ (Wᵗʲ − W̄ₜ)
        self.last = {"loss": float(report[0]), "grad_norm": float(report[2]),
                     "skipped": not report[3]}
        if report[4]:  # the worker's loss scale took the blame: not divergence
            self.last["overflow"] = True
        return self.last

    def _work(self, batch) -> dict:
        xp = get_array_module(self.params[0].data)
        arrays = batch if isinstance(batch, tuple) else (batch,)
        samples = [xp.empty_like(a) for a in arrays]  # shapes from this rank's own copy
        flat = xp.empty(self.layout.n, self.layout.dtype)  # W̄ₜ end to end (K,)
        self.comm.wait_all([self.comm.irecv(s, 0, SAMPLES + 1 + k) for k, s in enumerate(samples)]
                           + [self.comm.irecv(flat, 0, CENTRE)])
        centre = self.layout.views(flat)
        weights = self.optimizer.weights()  # Wᵗʲ: fp32 masters in mixed precision
        mine = self.layout.flatten(xp, weights)  # Wᵗʲ end to end, before moving
        given = tuple(samples) if isinstance(batch, tuple) else samples[0]
        self.optimizer.zero_grad()
        mean, norm, finite, units = own_verdict(self, given)
        refusal = None if finite else refused(self.optimizer, mean, norm)  # halves its scale
        report = np.array([mean, units, norm / self.optimizer.grad_scale, float(finite),
                           float(bool(refusal and refusal.get("overflow")))])
        sends = [self.comm.isend(mine, 0, WEIGHTS), self.comm.isend(report, 0, REPORT)]
        if finite:
            alpha = self.optimizer.lr * self.rho
            for x, c in zip(weights, centre):
                x -= alpha * (x - c)  # eq. 3's elastic term, from Wᵗʲ and W̄ₜ
            self.optimizer.round_params()
            self.last = guarded_step(self.optimizer, self.params, mean, self.grad_clip, norm)
        else:
            self.last = refusal
        self.comm.wait_all(sends)
        return self.last
