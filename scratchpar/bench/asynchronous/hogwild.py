"""The asynchronous benchmark's problems, runs copied as they go, and its Hogwild part."""

from __future__ import annotations

import time
from dataclasses import fields

import numpy as np

from ... import optim
from ...backend import to_device, to_host
from ...comm.flat import Layout
from ...comm.mesh import Mesh
from ...comm.window import SharedArray
from ...device_rng import DeviceRandom
from ...parallel import SingleDevice
from ...parallel.hogwild import Hogwild, LockedHogwild
from ...train.config import Config, DataConfig, ModelConfig
from ...train.task import Task, build_task

SPARSE = ("sparse-logreg", "matrix-factorization")  # a step touches a few rows of θ
DATA = {f.name for f in fields(DataConfig)}


def task(name: str, cfg: dict) -> Task:
    """Problem ``name``'s data and fresh float32 model (seed 0) sized by ``cfg``, as the training
    command builds them; dense-mlp is its classification source and MLP."""
    data = DataConfig(source="classification" if name == "dense-mlp" else name,
                      **{k: v for k, v in cfg.items() if k in DATA})
    model = ModelConfig(hidden_sizes=tuple(cfg.get("hidden", ())))
    return build_task(Config(model, data), DeviceRandom(0, 1, 0))


def flat(arrays) -> np.ndarray:
    """``arrays`` end to end as one host vector (K,), as Hogwild's window lays θ out."""
    return np.concatenate([to_host(a).reshape(-1) for a in arrays])


def snapshot_run(comm, strategy, batches: list, snapshots: int, read) -> dict | None:
    """``strategy``'s steps on ``batches`` from a barrier, then its shutdown; rank 0's copies of θ
    (``read()``, racing any writers) from start to end, the report and each rank's seconds."""
    every = max(1, len(batches) // snapshots)
    comm.barrier()
    start = time.perf_counter()
    copies = [(0.0, 0, read())] if comm.rank == 0 else []
    for k, batch in enumerate(batches):
        strategy.step(batch)
        if comm.rank == 0 and (k + 1) % every == 0:
            copies.append((time.perf_counter() - start, k + 1, read()))
    per_rank = comm.allgather_obj(time.perf_counter() - start, "a run's seconds")
    report = strategy.shutdown()
    copies += [(max(per_rank), len(batches), read())] if comm.rank == 0 else []
    strategy.close()
    return None if comm.rank else {"seconds": max(per_rank), "per_rank_s": per_rank,
                                   "steps": len(batches), "report": report, "snapshots": copies}


def curve(t: Task, run: dict, cfg: dict, per_step: int = 1) -> dict:
    """``run`` with its copies of θ replaced by [seconds, updates, held-out loss] (``t``'s model
    loaded with each, on ``cfg``'s held-out batches), ``per_step`` updates a step."""
    params = t.model.parameters()
    layout, points = Layout([p.shape for p in params]), []
    for seconds, k, theta in run.pop("snapshots"):
        layout.unpack(to_device(theta), [p.data for p in params])
        points.append([seconds, k * per_step, t.evaluate(cfg["eval_batches"], cfg["eval_rows"])])
    return {**run, "curve": points, "updates": run["steps"] * per_step}


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
    """Rank 0's :func:`snapshot_run` of serial SGD or the Hogwild of ``mode`` on ``mesh``'s P
    ranks: step k is updates kP … kP + P − 1 of ``pool``, worker r's update kP + r."""
    p, width = mesh.world.size, mesh.world.size * cfg["batch"]
    # Hogwild writes γ = η·n_w/N = η/P: the serial rate γ = lr is plain SGD at η = lr·P
    args = (t.model, lambda params: optim.SGD(params, lr * p), t)
    strategy = SingleDevice(*args) if mode == "serial" else MODES[mode](*args, mesh)

    def read():
        return flat([q.data for q in strategy.params] if mode == "serial"
                    else strategy.store.values())

    batches = [tuple(to_device(a[k * width:(k + 1) * width]) for a in pool)
               for k in range(cfg["updates"] // p)]
    return snapshot_run(mesh.world, strategy, batches, cfg["snapshots"], read)


def hogwild_part(comm, cfg: dict) -> dict:
    """Per problem, each contender's ``rounds`` runs (reverse order every other round) on the
    first P ranks, evaluated by rank 0; then the collisions at each P ≥ 2, untimed."""
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
