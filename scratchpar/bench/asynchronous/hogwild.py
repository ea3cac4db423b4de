"""The asynchronous benchmark's Hogwild part: contenders in turns, then collisions counted."""

from __future__ import annotations

import numpy as np

from ... import optim
from ...backend import to_device
from ...comm.mesh import Mesh
from ...comm.window import SharedArray
from ...parallel import SingleDevice
from ...parallel.hogwild import Hogwild, LockedHogwild
from .problems import curve, flat, snapshot_run, task


class CountingHogwild(Hogwild):
    """Lock-free Hogwild (Niu et al. 2011, Algorithm 1) with a shared window ``written[w, r]``
    beside θ: the writes worker w has finished to row r (an index of a parameter's first axis),
    added by w alone after its write, so exact without a lock. A row collides when the others'
    count grew between this worker's read of it and its write (docs/hogwild.md, Measurements).
    ``counts``: per parameter, the coordinates written and those in colliding rows;
    ``colliding``: the writes with a colliding row."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        rows = [p.shape[0] if p.ndim else 1 for p in self.params]  # per parameter
        self.row_sizes = [p.size // n for p, n in zip(self.params, rows)]
        self.indices = [start + np.arange(n)  # (n,) each parameter's rows of ``written``
                        for start, n in zip(np.cumsum([0, *rows[:-1]]), rows)]
        self.written = SharedArray(self.comm, (self.comm.size, sum(rows)), np.int64)  # (P, R)
        self.lines: list[np.ndarray] = []  # this step's rows of ``written``, per parameter
        self.seen: list[np.ndarray] = []  # the others' writes to them at the read
        self.counts = {name: {"coordinates": 0, "colliding": 0} for name in self.names}
        self.writes = self.colliding = 0

    def _others(self) -> list[np.ndarray]:
        """The other workers' writes so far to each of this step's ``lines``: (n,) each."""
        theirs = np.delete(self.written.array, self.comm.rank, axis=0)  # (P - 1, R)
        return [theirs[:, line].sum(axis=0) for line in self.lines]

    def _rows(self, batch) -> list[tuple]:
        rows = super()._rows(batch)  # called just before the read of θ's rows
        self.lines = [every[theirs].reshape(-1) for every, (_, theirs) in zip(self.indices, rows)]
        self.seen = self._others()
        return rows

    def _write(self, rows: list, steps: list) -> None:
        hit = False
        for name, before, after, size, s in zip(self.names, self.seen, self._others(),
                                                self.row_sizes, steps):
            if s is not None:
                collided = after > before  # (n,) another worker wrote the row in between
                self.counts[name]["coordinates"] += collided.size * size
                self.counts[name]["colliding"] += int(collided.sum()) * size
                hit |= bool(collided.any())
        self.writes, self.colliding = self.writes + 1, self.colliding + hit
        super()._write(rows, steps)
        for line, s in zip(self.lines, steps):
            if s is not None:
                self.written.array[self.comm.rank, line] += 1  # after the write: it has landed

    def shutdown(self) -> list[dict]:
        """Collective: every rank's counts, after Hogwild's shutdown."""
        super().shutdown()
        return self.comm.allgather_obj({"writes": self.writes, "colliding": self.colliding,
                                        "parameters": self.counts}, "hogwild collisions")

    def close(self) -> None:
        self.written.free()
        super().close()


MODES = {"hogwild": Hogwild, "locked": LockedHogwild, "counting": CountingHogwild}


def run(mesh, t, lr: float, mode: str, pool: tuple, cfg: dict) -> dict | None:
    """Serial SGD (``SingleDevice``: update u a dense step on samples [u·b, (u+1)·b)) or the
    Hogwild of ``mode`` on every rank of ``mesh``, each worker on its rows of the same global
    batches: step k's at P processes is samples [k·P·b, (k+1)·P·b), so worker r's rows are
    update kP + r's. Rank 0's run with its copies of θ (Hogwild's window, racing the writers).
    Hogwild writes γ = η·n_w/N and a worker's share n_w/N of the global batch is 1/P: the
    serial run's step γ = ``lr`` is η = lr·P; plain SGD, since Hogwild's write is its step."""
    p, width = mesh.world.size, mesh.world.size * cfg["batch"]
    args = (t.model, lambda params: optim.SGD(params, lr * p), t)  # plain SGD at η = lr·P
    strategy = SingleDevice(*args) if mode == "serial" else MODES[mode](*args, mesh)

    def read():
        return flat([q.data for q in strategy.params] if mode == "serial"
                    else strategy.store.values())

    batches = [tuple(to_device(a[k * width:(k + 1) * width]) for a in pool)
               for k in range(cfg["updates"] // p)]
    return snapshot_run(mesh.world, strategy, batches, cfg["snapshots"], read)


def hogwild_part(comm, cfg: dict) -> dict:
    """Each problem's contenders (``cfg["contenders"]``: name, processes, mode serial | hogwild |
    locked) in ``rounds`` turns, in reverse order every other round, on the first P ranks (the
    others nap at a barrier); rank 0 evaluates each run's copies. Then the collision counts
    of lock-free Hogwild at each P ≥ 2 (untimed)."""
    sizes = sorted({c["processes"] for c in cfg["contenders"]} | set(cfg["collisions"]))
    meshes = {p: Mesh(comm.split(0 if comm.rank < p else 1, name=f"first {p} ranks"))
              for p in sizes}  # a worker on the whole θ each
    order, out = cfg["contenders"], {}
    counting = [{"processes": p, "mode": "counting"} for p in cfg["collisions"]]
    for name, pcfg in cfg["problems"].items():
        data = task(name, pcfg).dataset
        pool = data.batch(0, cfg["updates"] * cfg["batch"])  # host: every contender's samples
        runs, counted = {c["name"]: [] for c in order}, {}
        turns = [c for r in range(cfg["rounds"]) for c in (order[::-1] if r % 2 else order)]
        for c in turns + counting:
            t, p = task(name, pcfg), c["processes"]
            done = run(meshes[p], t, pcfg["lr"], c["mode"], pool, cfg) if comm.rank < p else None
            if comm.rank == 0 and c["mode"] == "counting":
                counted[p] = done["report"]
            elif comm.rank == 0:
                runs[c["name"]].append(curve(t, done, cfg, p))
            comm.barrier()
        out[name] = {"floor": data.bayes_risk() if comm.rank == 0 else None, "runs": runs,
                     "collisions": counted}
    for mesh in meshes.values():
        mesh.free()
        mesh.world.free()
    return out
