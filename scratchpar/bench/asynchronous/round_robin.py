"""The asynchronous benchmark's round-robin part: where the EASGD master's time goes."""

from __future__ import annotations

import time

from ... import optim
from ...parallel import RoundRobinEASGD
from ..standin import StandIn
from .problems import dataset, rows, task


class WaitClock:
    """The master's communicator, passed through, with the start and end of its last wait."""

    def __init__(self, comm):
        self._comm = comm
        self.started = self.ended = 0.0

    def __getattr__(self, name):
        return getattr(self._comm, name)

    def wait_all(self, requests) -> None:
        self.started = time.perf_counter()
        self._comm.wait_all(requests)
        self.ended = time.perf_counter()


class TimedRoundRobin(RoundRobinEASGD):
    """Round-robin EASGD whose master splits each step's time three ways: ``pack`` (its samples
    and the centre to host arrays and posted to worker t mod G), ``wait`` (until the worker's
    weights and report are in: its compute and the messages) and ``update`` (eq. 2 with one
    worker, W̄ₜ₊₁ = W̄ₜ + ηρ (Wᵗʲ − W̄ₜ); Zhang et al. 2015)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seconds = {"pack": 0.0, "wait": 0.0, "update": 0.0}
        if self.comm.rank == 0:
            self.comm = WaitClock(self.comm)

    def _serve(self, batch, turn: int) -> dict:
        start = time.perf_counter()
        out = super()._serve(batch, turn)
        end, clock = time.perf_counter(), self.comm
        self.seconds["pack"] += clock.started - start
        self.seconds["wait"] += clock.ended - clock.started
        self.seconds["update"] += end - clock.ended
        return out


def stand_in_loss(model: StandIn, batch, reduction: str = "mean"):
    """The stand-in's loss of a real (x, y) batch: a sleep of the MLP's time on its rows."""
    return model.loss(batch[-1], reduction)


def one_run(comm, compute: str, batches: list, cfg: dict) -> dict | None:
    """``steps`` round-robin steps on every rank of ``comm`` from a barrier (the master serves
    worker t mod G; a worker whose turn it is not returns at once); rank 0 returns its split."""
    pcfg = cfg["problem"]
    if compute == "real":
        t = task(pcfg["name"], pcfg, dataset(pcfg["name"], pcfg))
        model, loss_fn = t.model, t.loss
    else:
        sizes = [pcfg["n_features"], *pcfg["hidden"], pcfg["n_classes"]]
        model, loss_fn = StandIn(sizes, cfg["per_row_s"], cfg["forward_share"]), stand_in_loss
    strategy = TimedRoundRobin(model, optim.SGD(model.parameters(), cfg["lr"]), loss_fn,
                               lambda batch: len(batch[-1]), comm, rho=cfg["rho"])
    comm.barrier()
    start = time.perf_counter()
    for batch in batches:
        strategy.step(batch)
    seconds = time.perf_counter() - start
    strategy.close()
    if comm.rank != 0:
        return None
    return {"workers": comm.size - 1, "compute": compute, "steps": len(batches),
            "seconds": seconds, **strategy.seconds}


def round_robin_part(comm, cfg: dict) -> list[dict]:
    """Each (G, compute) of ``cfg["runs"]`` on the first G + 1 ranks (the others nap at a
    barrier), in order: rank 0 returns the master's split of every run."""
    pcfg = cfg["problem"]
    data = dataset(pcfg["name"], pcfg)
    batches = [rows(data.batch(k, cfg["batch"]), 0, cfg["batch"]) for k in range(cfg["steps"])]
    out = []
    for workers, compute in cfg["runs"]:
        sub = comm.split(0 if comm.rank <= workers else 1, name=f"first {workers + 1} ranks")
        if comm.rank <= workers:
            run = one_run(sub, compute, batches, cfg)
            if comm.rank == 0:
                out.append(run)
        sub.free()
        comm.barrier()
    return out
