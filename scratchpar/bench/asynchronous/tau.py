"""The asynchronous benchmark's τ part: asynchronous EASGD against Downpour per period τ."""

from __future__ import annotations

import time

from ... import optim
from ...parallel import AsyncEASGD, AsyncParameterServer
from .problems import dataset, evaluate, flat, held_out, rows, task


def build(method: str, t, cfg: dict, tau: int, comm):
    """EASGD with α = ηρ = β/W (Zhang et al. 2015, §5: β = Wα = 0.9), or Downpour with
    n_push = n_fetch = τ (Dean et al. 2012, §4.1); both plain SGD at the same η."""
    lr, workers = cfg["lr"], comm.size - 1
    if method == "easgd":
        rho = cfg["beta"] / workers / lr  # α = ηρ = β/W
        return AsyncEASGD(t.model, optim.SGD(t.model.parameters(), lr), t.loss, t.count, comm,
                          rho=rho, tau=tau)
    return AsyncParameterServer(t.model, lambda params: optim.SGD(params, lr), t.loss, t.count,
                                comm, n_push=tau, n_fetch=tau)


def one_run(method: str, tau: int, t, batches: list, held: list, cfg: dict, comm) -> dict | None:
    """``steps`` steps on every rank, back to back; the master (rank 0, EASGD's centre or the
    server's parameters) is copied every few of its steps and after the shutdown, and evaluated
    after the run. Rank 0 returns [steps, held-out loss] points and the exchanges it served."""
    strategy = build(method, t, cfg, tau, comm)
    every = max(1, len(batches) // cfg["snapshots"])
    snapshots = []

    def copy(step: int) -> None:
        strategy.gather_model()
        snapshots.append((step, flat(t.model.parameters())))

    comm.barrier()
    start = time.perf_counter()
    if comm.rank == 0:
        copy(0)
    for k, batch in enumerate(batches):
        strategy.step(batch)
        if comm.rank == 0 and (k + 1) % every == 0:
            copy(k + 1)
    report = strategy.shutdown()
    seconds = time.perf_counter() - start
    exchanges = strategy.exchanges if method == "easgd" else report and report["pushes"]
    if comm.rank == 0:
        copy(len(batches))
    strategy.close()
    if comm.rank != 0:
        return None
    return {"seconds": seconds, "exchanges": exchanges,
            "curve": [[k, evaluate(t, s, held)] for k, s in snapshots]}


def tau_part(comm, cfg: dict) -> dict:
    """Both methods at each τ on the same global batches (W·b rows, worker i's rows i·b …),
    each from the same fresh model: rank 0 returns the runs keyed "easgd τ" and "downpour τ"."""
    pcfg = cfg["problem"]
    data = dataset(pcfg["name"], pcfg)
    width = (comm.size - 1) * cfg["batch"]
    batches = [rows(data.batch(k, width), 0, width) for k in range(cfg["steps"])]
    held = held_out(data, cfg)
    runs = {}
    for tau in cfg["taus"]:
        for method in ("easgd", "downpour"):
            t = task(pcfg["name"], pcfg, data)
            runs[f"{method} {tau}"] = one_run(method, tau, t, batches, held, cfg, comm)
    return {"runs": runs, "floor": data.entropy_floor(), "workers": comm.size - 1}
