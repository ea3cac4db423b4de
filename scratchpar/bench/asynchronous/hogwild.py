"""The asynchronous benchmark's Hogwild part: contenders in turns, then collisions counted."""

from __future__ import annotations

import time

import numpy as np

from ... import optim
from ...parallel import Hogwild, SingleDevice
from .collisions import CountingHogwild
from .problems import dataset, evaluate, flat, held_out, rows, task


def serial(t, lr: float, pool: tuple, cfg: dict) -> dict:
    """Plain serial SGD on one process: update u on samples [u·b, (u+1)·b) of ``pool``, every
    update a dense SGD step of the whole model (``SingleDevice``)."""
    b, updates = cfg["batch"], cfg["updates"]
    batches = [rows(pool, u * b, (u + 1) * b) for u in range(updates)]
    single = SingleDevice(t.model, optim.SGD(t.model.parameters(), lr), t.loss)
    every = max(1, updates // cfg["snapshots"])
    start = time.perf_counter()
    snapshots = [(0.0, 0, flat(single.params))]
    for u, batch in enumerate(batches):
        single.step(batch)
        if (u + 1) % every == 0:
            snapshots.append((time.perf_counter() - start, u + 1, flat(single.params)))
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "per_rank_s": [seconds], "updates": updates,
            "snapshots": snapshots + [(seconds, updates, flat(single.params))]}


def global_batches(pool: tuple, processes: int, cfg: dict) -> list[tuple]:
    """Step k's global batch at P processes: samples [k·P·b, (k+1)·P·b), so worker r's rows
    are update kP + r's, the serial run's samples in the same order."""
    width = processes * cfg["batch"]
    return [rows(pool, k * width, (k + 1) * width) for k in range(cfg["updates"] // processes)]


def sgd(t, lr: float, processes: int):
    """Hogwild's optimizer for a write of γ = ``lr`` on a worker's b samples, the serial run's
    step: Hogwild writes γ = η·n_w/N, and a worker's share n_w/N of the global batch is 1/P."""
    return optim.SGD(t.model.parameters(), lr * processes)


def theta(strategy) -> np.ndarray:
    """A copy of Hogwild's θ as one vector (K,), read while the others may be writing it."""
    return np.concatenate([v.reshape(-1) for v in strategy.store.values()])


def hogwild(comm, t, lr: float, lock: bool, pool: tuple, cfg: dict) -> dict | None:
    """Hogwild on every rank of ``comm`` from a barrier, each worker on its rows of the same
    global batches; rank 0 copies θ every few steps (racing the writers, as any reader of θ
    does). Rank 0 returns the run, the others None."""
    strategy = Hogwild(t.model, sgd(t, lr, comm.size), t.loss, t.count, comm, lock=lock)
    batches = global_batches(pool, comm.size, cfg)
    every = max(1, cfg["updates"] // cfg["snapshots"] // comm.size)
    snapshots = []
    comm.barrier()
    start = time.perf_counter()
    if comm.rank == 0:
        snapshots.append((0.0, 0, theta(strategy)))
    for k, batch in enumerate(batches):
        strategy.step(batch)
        if comm.rank == 0 and (k + 1) % every == 0:
            snapshots.append((time.perf_counter() - start, (k + 1) * comm.size, theta(strategy)))
    mine = time.perf_counter() - start
    strategy.shutdown()
    per_rank = comm.allgather_obj(mine, "hogwild run")
    final = theta(strategy)
    strategy.close()
    if comm.rank != 0:
        return None
    updates = len(batches) * comm.size
    return {"seconds": max(per_rank), "per_rank_s": per_rank, "updates": updates,
            "snapshots": snapshots + [(max(per_rank), updates, final)]}


def collisions(comm, t, lr: float, pool: tuple, cfg: dict) -> list[dict]:
    """Lock-free Hogwild, instrumented (``CountingHogwild``), on the same global batches:
    every rank's counts of writes, colliding writes and coordinates (on every rank)."""
    strategy = CountingHogwild(t.model, sgd(t, lr, comm.size), t.loss, t.count, comm)
    batches = global_batches(pool, comm.size, cfg)
    comm.barrier()
    for batch in batches:
        strategy.step(batch)
    strategy.shutdown()
    mine = {"writes": strategy.writes, "colliding": strategy.colliding,
            "parameters": strategy.counts}
    every = comm.allgather_obj(mine, "hogwild collisions")
    strategy.close()
    return every


def curve(t, run: dict, held: list) -> dict:
    """A run with its snapshots replaced by the held-out loss of each: [seconds, updates, loss]."""
    points = [[s, u, evaluate(t, snapshot, held)] for s, u, snapshot in run["snapshots"]]
    return {**{k: v for k, v in run.items() if k != "snapshots"}, "curve": points}


def hogwild_part(comm, cfg: dict) -> dict:
    """Each problem's contenders (``cfg["contenders"]``: key, processes, mode serial | hogwild |
    locked) in ``rounds`` turns, in reverse order every other round, on the first P ranks (the
    others nap at a barrier); rank 0 evaluates each run's snapshots. Then the collision counts
    of lock-free Hogwild at each P ≥ 2."""
    sizes = sorted({c["processes"] for c in cfg["contenders"]} | set(cfg["collisions"]))
    subs = {p: comm.split(0 if comm.rank < p else 1, name=f"first {p} ranks") for p in sizes}
    out = {}
    for name, pcfg in cfg["problems"].items():
        data = dataset(name, pcfg)
        pool = data.batch(0, cfg["updates"] * cfg["batch"])  # host: every contender's samples
        held = held_out(data, cfg)
        runs = {c["key"]: [] for c in cfg["contenders"]}
        for r in range(cfg["rounds"]):
            for c in cfg["contenders"][::-1] if r % 2 else cfg["contenders"]:
                run, t = None, task(name, pcfg, data)
                if comm.rank < c["processes"]:
                    sub = subs[c["processes"]]
                    run = serial(t, pcfg["lr"], pool, cfg) if c["mode"] == "serial" else \
                        hogwild(sub, t, pcfg["lr"], c["mode"] == "locked", pool, cfg)
                if comm.rank == 0:
                    runs[c["key"]].append(curve(t, run, held))
                comm.barrier()
        counted = {}
        for p in cfg["collisions"]:
            if comm.rank < p:
                counted[p] = collisions(subs[p], task(name, pcfg, data), pcfg["lr"], pool, cfg)
            comm.barrier()
        floor = data.entropy_floor() if comm.rank == 0 else None
        out[name] = {"floor": floor, "runs": runs, "collisions": counted}
    for sub in subs.values():
        sub.free()
    return out
