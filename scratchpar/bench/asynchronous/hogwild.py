"""The asynchronous benchmark's Hogwild part: contenders in turns, then collisions counted."""

from __future__ import annotations

import numpy as np

from ... import optim
from ...comm.mesh import Mesh
from ...comm.window import SharedArray
from ...parallel import SingleDevice
from ...parallel.hogwild import Hogwild, LockedHogwild
from .problems import curve, dataset, flat, held_out, rows, snapshot_run, task


class CountingHogwild(Hogwild):
    """Lock-free Hogwild (Niu et al. 2011, Algorithm 1) with a shared window ``written[w, r]``
    beside θ: the writes worker w has finished to row r (an index of a parameter's first axis),
    added by w alone after its write, so exact without a lock. A row collides when the others'
    count grew between this worker's read of it and its write (docs/hogwild.md, Measurements).
    ``counts``: per parameter, the coordinates written and those in colliding rows;
    ``colliding``: the writes with a colliding row."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        comm = self.comm
        self.row_counts = [p.shape[0] if p.ndim else 1 for p in self.params]
        self.row_sizes = [p.size // n for p, n in zip(self.params, self.row_counts)]
        self.starts = np.cumsum([0, *self.row_counts[:-1]])  # each parameter's first row
        self.written = SharedArray(comm, (comm.size, sum(self.row_counts)), np.int64)  # (P, R)
        self.others = np.arange(comm.size) != comm.rank  # (P,) the other workers' lines
        self.lines: list[np.ndarray] = []  # this step's rows of ``written``, per parameter
        self.seen: list[np.ndarray] = []  # the others' writes to them at the read
        self.counts = {name: {"coordinates": 0, "colliding": 0} for name in self.names}
        self.writes = self.colliding = 0

    def _line(self, i: int, host_rows) -> np.ndarray:
        """Parameter i's rows ``host_rows`` (indices or ``slice(None)``) as rows of ``written``."""
        start = self.starts[i]
        if isinstance(host_rows, slice):
            return np.arange(start, start + self.row_counts[i])  # (n,)
        return start + np.asarray(host_rows).reshape(-1)  # (n,)

    def _others(self, lines: list[np.ndarray]) -> list[np.ndarray]:
        return [self.written.array[self.others][:, line].sum(axis=0) for line in lines]  # (n,)

    def _rows(self, batch) -> list[tuple]:
        rows = super()._rows(batch)  # called just before the read of θ's rows
        self.lines = [self._line(i, theirs) for i, (_, theirs) in enumerate(rows)]
        self.seen = self._others(self.lines)
        return rows

    def _write(self, rows: list, steps: list) -> None:
        now = self._others(self.lines)
        hit = False
        for i, (name, before, after, s) in enumerate(zip(self.names, self.seen, now, steps)):
            if s is None:
                continue
            collided = after > before  # (n,) another worker wrote the row in between
            self.counts[name]["coordinates"] += len(collided) * self.row_sizes[i]
            self.counts[name]["colliding"] += int(collided.sum()) * self.row_sizes[i]
            hit |= bool(collided.any())
        self.writes += 1
        self.colliding += hit
        super()._write(rows, steps)
        for line, s in zip(self.lines, steps):
            if s is not None:
                self.written.array[self.comm.rank, line] += 1  # after the write: it has landed

    def close(self) -> None:
        self.written.free()
        super().close()


def global_batches(pool: tuple, processes: int, cfg: dict) -> list[tuple]:
    """Step k's global batch at P processes: samples [k·P·b, (k+1)·P·b), so worker r's rows
    are update kP + r's, the serial run's samples in the same order."""
    width = processes * cfg["batch"]
    return [rows(pool, k * width, (k + 1) * width) for k in range(cfg["updates"] // processes)]


def sgd(lr: float):
    """The factory of plain SGD at ``lr``: Hogwild's write is its step."""
    return lambda params: optim.SGD(params, lr)


def run(mesh, t, lr: float, mode: str, pool: tuple, cfg: dict) -> dict | None:
    """Serial SGD (``SingleDevice``, one process: update u on samples [u·b, (u+1)·b), every
    update a dense step of the whole model), or Hogwild (locked or not) on every rank of
    ``mesh``, each worker on its rows of the same global batches: rank 0's run with its
    copies of θ (Hogwild's window, racing the writers). Hogwild writes γ = η·n_w/N, and a
    worker's share n_w/N of the global batch is 1/P: the serial run's step γ = ``lr`` is
    η = lr·P."""
    comm = mesh.world
    p, make_optimizer = comm.size, sgd(lr * comm.size)
    if mode == "serial":
        strategy = SingleDevice(t.model, make_optimizer, t)
        return snapshot_run(comm, strategy, global_batches(pool, p, cfg), cfg["snapshots"],
                            lambda: flat(strategy.params))
    strategy = (LockedHogwild if mode == "locked" else Hogwild)(t.model, make_optimizer, t, mesh)
    return snapshot_run(comm, strategy, global_batches(pool, p, cfg), cfg["snapshots"],
                        lambda: np.concatenate([v.reshape(-1) for v in strategy.store.values()]))


def collisions(mesh, t, lr: float, pool: tuple, cfg: dict) -> list[dict]:
    """Lock-free Hogwild, instrumented (``CountingHogwild``), on the same global batches:
    every rank's counts of writes, colliding writes and coordinates (on every rank)."""
    comm = mesh.world
    strategy = CountingHogwild(t.model, sgd(lr * comm.size), t, mesh)
    comm.barrier()
    for batch in global_batches(pool, comm.size, cfg):
        strategy.step(batch)
    strategy.shutdown()
    every = comm.allgather_obj({"writes": strategy.writes, "colliding": strategy.colliding,
                                "parameters": strategy.counts}, "hogwild collisions")
    strategy.close()
    return every


def hogwild_part(comm, cfg: dict) -> dict:
    """Each problem's contenders (``cfg["contenders"]``: key, processes, mode serial | hogwild |
    locked) in ``rounds`` turns, in reverse order every other round, on the first P ranks (the
    others nap at a barrier); rank 0 evaluates each run's copies. Then the collision counts
    of lock-free Hogwild at each P ≥ 2."""
    sizes = sorted({c["processes"] for c in cfg["contenders"]} | set(cfg["collisions"]))
    subs = {p: comm.split(0 if comm.rank < p else 1, name=f"first {p} ranks") for p in sizes}
    meshes = {p: Mesh(sub) for p, sub in subs.items()}  # a worker on the whole θ each
    out = {}
    for name, pcfg in cfg["problems"].items():
        data = dataset(name, pcfg)
        pool = data.batch(0, cfg["updates"] * cfg["batch"])  # host: every contender's samples
        held = held_out(data, cfg)
        runs = {c["key"]: [] for c in cfg["contenders"]}
        for r in range(cfg["rounds"]):
            for c in cfg["contenders"][::-1] if r % 2 else cfg["contenders"]:
                t, p = task(name, pcfg, data), c["processes"]
                done = run(meshes[p], t, pcfg["lr"], c["mode"], pool, cfg) \
                    if comm.rank < p else None
                if comm.rank == 0:
                    runs[c["key"]].append(curve(t, done, held, p))
                comm.barrier()
        counted = {}
        for p in cfg["collisions"]:
            if comm.rank < p:
                counted[p] = collisions(meshes[p], task(name, pcfg, data), pcfg["lr"], pool,
                                        cfg)
            comm.barrier()
        out[name] = {"floor": data.bayes_risk() if comm.rank == 0 else None, "runs": runs,
                     "collisions": counted}
    for mesh, sub in zip(meshes.values(), subs.values()):
        mesh.free()
        sub.free()
    return out
