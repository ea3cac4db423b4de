"""The asynchronous benchmark's EASGD parts: against Downpour per period τ, and where the
round-robin master's time goes."""

from __future__ import annotations

import itertools
import time

from ... import optim
from ...comm.mesh import Mesh
from ...parallel import AsyncEASGD, AsyncParameterServer, RoundRobinEASGD
from ..standin import sleeping_mlp
from .hogwild import curve, flat, snapshot_run, task


def tau_part(comm, cfg: dict) -> dict:
    """EASGD with α = ηρ = β/W (Zhang et al. 2015, §5: β = Wα = 0.9) and Downpour with
    n_push = n_fetch = τ (Dean et al. 2012, §4.1), both plain SGD at the same η, at each τ on
    the same global batches from the same fresh model: rank 0's runs keyed "EASGD τ" and
    "Downpour τ", the master's parameters' held-out curve and the exchanges it served."""
    pcfg, workers, runs, mesh = cfg["problem"], comm.size - 1, {}, Mesh(comm)
    batches = [task(pcfg["name"], pcfg).batch(k, workers * cfg["batch"])[0]
               for k in range(cfg["steps"])]
    for tau, method in itertools.product(cfg["taus"], ("EASGD", "Downpour")):
        t = task(pcfg["name"], pcfg)
        args = (t.model, lambda params: optim.SGD(params, cfg["lr"]), t, mesh)
        strategy = (AsyncEASGD(*args, rho=cfg["beta"] / workers / cfg["lr"], tau=tau)  # α = β/W
                    if method == "EASGD" else AsyncParameterServer(*args, n_push=tau, n_fetch=tau))

        def read(strategy=strategy, t=t):
            strategy.gather_model()  # the centre, or the servers' parameters
            return flat(p.data for p in t.model.parameters())

        run = snapshot_run(comm, strategy, batches, cfg["snapshots"], read)
        if comm.rank == 0:
            runs[f"{method} {tau}"] = {
                "curve": curve(t, run, cfg)["curve"],
                "exchanges": strategy.exchanges if method == "EASGD" else run["report"]["pushes"]}
    mesh.free()
    return {"runs": runs, "floor": t.floor()}


class TimedRoundRobin(RoundRobinEASGD):
    """Round-robin EASGD whose master splits each step's seconds three ways: ``pack`` (its
    samples and the centre posted to worker t mod G), ``wait`` (the worker's compute and the
    messages) and ``update`` (eq. 4, W̄ₜ₊₁ = W̄ₜ + ηρ (Wᵗʲ − W̄ₜ); Zhang et al. 2015)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seconds = {"pack": 0.0, "wait": 0.0, "update": 0.0}
        self.waited = (0.0, 0.0)  # the start and end of the master's last wait
        if self.comm.rank == 0:  # its own communicator (a dup): its one wait a step, timed
            wait_all = self.comm.wait_all

            def timed(requests) -> None:
                begin = time.perf_counter()
                wait_all(requests)
                self.waited = (begin, time.perf_counter())

            self.comm.wait_all = timed

    def _serve(self, batch, turn: int) -> dict:
        start = time.perf_counter()
        out = super()._serve(batch, turn)
        end, (begin, ended) = time.perf_counter(), self.waited
        self.seconds["pack"] += begin - start
        self.seconds["wait"] += ended - begin
        self.seconds["update"] += end - ended
        return out


def round_robin_part(comm, cfg: dict) -> list[dict]:
    """Each (G, compute) of ``cfg["runs"]``: ``steps`` round-robin steps on the first G + 1
    ranks from a barrier (the others nap at a barrier), with the real MLP or a sleep of its time
    on the batch's rows; rank 0 returns the master's split of every run."""
    pcfg, out = cfg["problem"], []
    batches = [task(pcfg["name"], pcfg).batch(k, cfg["batch"])[0] for k in range(cfg["steps"])]
    for workers, compute in cfg["runs"]:
        sub = comm.split(0 if comm.rank <= workers else 1, name=f"first {workers + 1} ranks")
        if comm.rank <= workers:
            t = task(pcfg["name"], pcfg) if compute == "real" else sleeping_mlp(cfg)
            mesh = Mesh(sub)
            strategy = TimedRoundRobin(t.model, lambda params: optim.SGD(params, cfg["lr"]), t,
                                       mesh, rho=cfg["rho"])
            sub.barrier()
            start = time.perf_counter()
            for batch in batches:
                strategy.step(batch)
            seconds = time.perf_counter() - start
            strategy.close()
            mesh.free()
            if comm.rank == 0:
                out.append({"workers": workers, "compute": compute, "steps": len(batches),
                            "seconds": seconds, **strategy.seconds})
        sub.free()
        comm.barrier()
    return out
