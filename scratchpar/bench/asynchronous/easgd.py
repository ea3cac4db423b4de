"""The asynchronous benchmark's EASGD parts: against Downpour per period τ, and where the
round-robin master's time goes."""

from __future__ import annotations

import time

from ... import optim
from ...comm.mesh import Mesh
from ...parallel import AsyncEASGD, AsyncParameterServer, RoundRobinEASGD
from ..standin import Sleeping, StandIn
from .problems import curve, dataset, flat, held_out, rows, snapshot_run, task


def build(method: str, t, cfg: dict, tau: int, mesh):
    """EASGD with α = ηρ = β/W (Zhang et al. 2015, §5: β = Wα = 0.9), or Downpour with
    n_push = n_fetch = τ (Dean et al. 2012, §4.1); both plain SGD at the same η."""
    lr, workers = cfg["lr"], mesh.world.size - 1

    def sgd(params):
        return optim.SGD(params, lr)

    if method == "easgd":
        rho = cfg["beta"] / workers / lr  # α = ηρ = β/W
        return AsyncEASGD(t.model, sgd, t, mesh, rho=rho, tau=tau)
    return AsyncParameterServer(t.model, sgd, t, mesh, n_push=tau, n_fetch=tau)


def tau_part(comm, cfg: dict) -> dict:
    """Both methods at each τ on the same global batches (W·b rows, worker i's rows i·b …),
    each from the same fresh model, ``steps`` steps on every rank, back to back; rank 0 copies
    the master's parameters (EASGD's centre, the server's) every few steps and after the
    shutdown, and returns the runs keyed "easgd τ" and "downpour τ": [steps, held-out loss]
    points, and the exchanges the master served."""
    pcfg = cfg["problem"]
    data = dataset(pcfg["name"], pcfg)
    width = (comm.size - 1) * cfg["batch"]
    batches = [rows(data.batch(k, width), 0, width) for k in range(cfg["steps"])]
    held, runs, mesh = held_out(data, cfg), {}, Mesh(comm)
    for tau in cfg["taus"]:
        for method in ("easgd", "downpour"):
            t = task(pcfg["name"], pcfg, data)
            strategy = build(method, t, cfg, tau, mesh)

            def read(strategy=strategy, t=t):
                strategy.gather_model()
                return flat(t.model.parameters())

            run = snapshot_run(comm, strategy, batches, cfg["snapshots"], read)
            if comm.rank == 0:
                run = curve(t, run, held)
                runs[f"{method} {tau}"] = {
                    "seconds": run["seconds"], "curve": [[k, loss] for _, k, loss in run["curve"]],
                    "exchanges": strategy.exchanges if method == "easgd" else
                    run["report"] and run["report"]["pushes"]}
    mesh.free()
    return {"runs": runs, "floor": data.bayes_risk(), "workers": comm.size - 1}


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


def rr_run(comm, compute: str, batches: list, cfg: dict) -> dict | None:
    """``steps`` round-robin steps on every rank of ``comm`` from a barrier (the master serves
    worker t mod G; a worker whose turn it is not returns at once); rank 0 returns its split."""
    pcfg = cfg["problem"]
    if compute == "real":
        t = task(pcfg["name"], pcfg, dataset(pcfg["name"], pcfg))
        model, objective = t.model, t
    else:  # a sleep of the MLP's time on the batch's rows
        model, objective = StandIn([pcfg["n_features"], *pcfg["hidden"], pcfg["n_classes"]],
                                   cfg["per_row_s"], cfg["forward_share"]), Sleeping()
    mesh = Mesh(comm)
    strategy = TimedRoundRobin(model, lambda params: optim.SGD(params, cfg["lr"]), objective,
                               mesh, rho=cfg["rho"])
    comm.barrier()
    start = time.perf_counter()
    for batch in batches:
        strategy.step(batch)
    seconds = time.perf_counter() - start
    strategy.close()
    mesh.free()
    return None if comm.rank else {"workers": comm.size - 1, "compute": compute,
                                   "steps": len(batches), "seconds": seconds, **strategy.seconds}


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
            run = rr_run(sub, compute, batches, cfg)
            if comm.rank == 0:
                out.append(run)
        sub.free()
        comm.barrier()
    return out
