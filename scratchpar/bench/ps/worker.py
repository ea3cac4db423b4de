"""One rank of the parameter-server benchmark: runs with one worker slowed, and the
bottleneck, staleness and loss-time parts."""

from __future__ import annotations

from functools import partial

import numpy as np

from ... import backend, nn, optim, parallel
from ...comm.collectives import all_reduce_
from ...comm.mesh import Mesh
from ...comm.mpi import Communicator
from ...data import SyntheticLanguage
from ...data.shard import shard
from ...timing import clocked, medians, slowest, sync
from ...trace.chrome import write_chrome
from ...trace.tracer import Tracer
from ...train.task import Task
from ..standin import pause, sleeping_mlp
from ..timing import stepping, turns

SLOWED = 0  # the worker index slowed 2×: the first worker, rank S
MODES = {"sync": (parallel.SyncParameterServer, None),
         "ssp": (parallel.SSPParameterServer, "staleness"),
         "async": (parallel.AsyncParameterServer, None),
         "warmup": (parallel.SyncThenAsync, "warmup")}  # a spec's mode: its class and knob


def build(spec: dict, mesh, task=None):
    """The parameter server ``spec`` names (mode, S = ``servers``, ``lr``, SGD or ``"adam"``, its
    mode's knob τ or warm-up steps) training ``task``, by default a stand-in of the part's MLP."""
    cls, knob = MODES[spec["mode"]]
    task = task or sleeping_mlp(spec)
    opt = optim.Adam if spec.get("optimizer") == "adam" else optim.SGD
    return cls(task.model, lambda params: opt(params, spec["lr"]), task, mesh,
               servers=spec["servers"], **({knob: spec[knob]} if knob else {}))


def free_run(comm, make, batches: list, slowed_s: float = 0.0, after=lambda k, strategy: None,
             trace: bool = False) -> list[dict] | None:
    """``make()``'s steps on ``batches`` back to back from a barrier, then its shutdown, the
    slowed worker sleeping ``slowed_s`` after each (traced as "slowed"), every rank running
    ``after(k, strategy)`` after step k (k = len(batches): after the shutdown). Rank 0 returns
    every rank's record: role, each step's end (s), losses, waits for the pull, server 0's
    report and, with ``trace``, its regions."""
    comm.tracer = tracer = Tracer(comm.rank)  # before the strategy: its dup shares the tracer
    strategy = make()
    worker = comm.rank - strategy.servers
    slowed = worker == SLOWED and slowed_s > 0
    tracer.align(lambda: sync(comm))
    ends, metrics = [], {"loss": [], "wait_s": []}
    for k, batch in enumerate(batches):
        step = strategy.step(batch)
        for key in metrics.keys() & step.keys():
            metrics[key].append(round(step[key], 6))
        if slowed:
            with tracer.region("slowed", "compute"):
                pause(slowed_s)
        ends.append(round(tracer.now() * 1e-9, 6))
        after(k, strategy)
    report = None if isinstance(strategy, parallel.SyncParameterServer) else strategy.shutdown()
    done = tracer.now() * 1e-9
    after(len(batches), strategy)
    mine = {"rank": comm.rank, "worker": worker if worker >= 0 else None, "slowed": slowed,
            "ends_s": ends, "done_s": done, "metrics": metrics, "report": report}
    if trace:
        mine["trace"] = tracer.export()
    ranks = comm.allgather_obj(mine, "ps bench run")
    strategy.close()
    comm.tracer = None
    return ranks if comm.rank == 0 else None


class Counting(Communicator):
    """A communicator on the world that counts the bytes of the messages it posts."""

    def __init__(self):
        super().__init__(name="counting")
        self.sent = self.received = 0

    def isend(self, buf, dest: int, tag: int = 0):
        self.sent += buf.nbytes
        return super().isend(buf, dest, tag)

    def irecv(self, buf, source: int, tag: int = 0):
        self.received += buf.nbytes
        return super().irecv(buf, source, tag)


def bottleneck(comm, cfg: dict) -> dict:
    """Median seconds per step of the synchronous server at each S of ``server_counts`` and of
    DataParallel (one bucket) in turns on the same stand-in and batch; the SSP server at τ = 0
    back to back (its report: bytes, busy); each rank's bytes in a ring all-reduce of K."""
    batch = (backend.to_device(np.arange(cfg["batch"])),)  # (B,) row ids, a sample each
    mesh, task = Mesh(comm), sleeping_mlp(cfg)
    live = {f"sync S={s}": build({**cfg, "mode": "sync", "servers": s}, mesh)
            for s in cfg["server_counts"]}
    comm.tracer = tracer = Tracer(comm.rank)  # DataParallel's collectives name their algorithm
    params = task.model.parameters()
    live["dp"] = parallel.DataParallel(task.model, lambda params: optim.SGD(params, cfg["lr"]),
                                       task, mesh, bucket_bytes=sum(p.data.nbytes for p in params))
    timed = turns(comm, {name: stepping(s, batch) for name, s in live.items()}, cfg)
    comm.tracer = None
    for strategy in live.values():
        strategy.close()
    family = {}
    for s in cfg["server_counts"]:
        spec = {**cfg, "mode": "ssp", "staleness": 0, "servers": s}
        ranks = free_run(comm, partial(build, spec, mesh), [batch] * cfg["steps"])
        if ranks is not None:
            family[s] = {"report": ranks[0]["report"],
                         "seconds": max(r["ends_s"][-1] for r in ranks)}
    mesh.free()
    k, counting = sum(p.size for p in params), Counting()
    all_reduce_(counting, backend.xp_default().zeros(k, np.float32), algorithm="ring")  # (K,)
    ring = comm.allgather_obj({"sent": counting.sent, "received": counting.received}, "ring")
    counting.free()
    largest = max((e for e in tracer.events if e.name.startswith("all_reduce")),
                  key=lambda e: e.bytes)
    return {"parameters": k, "itemsize": params[0].data.dtype.itemsize, "timed": timed,
            "dp_all_reduce": largest.name, "family": family, "ring": ring}


def staleness(comm, cfg: dict) -> dict:
    """Each contender's steps back to back, the first worker sleeping its own compute time again
    after each; with a ``traces`` folder, the runs of ``timelines`` written there as Chrome
    traces of their first ``timeline_steps`` steps (to the end of the slowed worker's)."""
    batch = (backend.to_device(np.arange(cfg["batch"])),)  # (B,) row ids, a sample each
    slowed_s = len(shard(np.arange(cfg["batch"]), SLOWED, cfg["workers"])) * cfg["per_row_s"]
    runs, mesh = {}, Mesh(comm)
    for spec in cfg["contenders"]:
        name = cfg["timelines"].get(spec["name"]) if cfg["traces"] else None
        ranks = free_run(comm, partial(build, {**cfg, **spec}, mesh), [batch] * cfg["steps"],
                         slowed_s, trace=name is not None)
        if ranks is not None and name is not None:
            cut = next(r for r in ranks if r["slowed"])["ends_s"][cfg["timeline_steps"] - 1] * 1e9
            write_chrome(f"{cfg['traces']}/ps_timeline_{name}.trace.json",
                         [{**trace, "events": [e for e in trace["events"] if e["end"] <= cut]}
                          for trace in (r.pop("trace") for r in ranks)])
        runs[spec["name"]] = ranks
    mesh.free()
    return {"runs": runs}


def loss(comm, cfg: dict) -> dict:
    """Each contender trains a fresh GPT (seed 0) on the same batches, the first worker slowed 2×
    (it sleeps its own forward and backward again), ``rounds`` times in reverse order every
    other round; server 0 evaluates the servers' parameters every ``eval_every`` steps and last."""
    data = SyntheticLanguage(cfg["vocab"], cfg["order"], cfg["seq"], seed=0)

    def gpt():
        return Task(data, nn.GPT(cfg["vocab"], cfg["seq"], cfg["d_model"], cfg["heads"],
                                 cfg["layers"], np.random.default_rng(0), dtype=np.float32), "tok")

    task = gpt()
    batches = [task.batch(k, cfg["batch"])[0] for k in range(cfg["steps"])]
    slowed_s = 0.0
    if comm.rank - cfg["servers"] == SLOWED:  # its forward and backward, the others waiting
        mine = shard(batches[0], SLOWED, cfg["workers"])
        slowed_s = medians(clocked(lambda: task.loss(task.model, mine).backward()), 5,
                           start=task.model.zero_grad)[0]
    slowed_s = float(slowest(comm, [slowed_s])[0])
    order, mesh = cfg["contenders"], Mesh(comm)
    runs = {spec["name"]: [] for spec in order}
    for spec in [spec for r in range(cfg["rounds"]) for spec in (order[::-1] if r % 2 else order)]:
        evals = []

        def evaluate(k: int, strategy, evals=evals):  # every eval_every clocks, and the last
            if strategy.is_server and (k == cfg["steps"] or (k + 1) % cfg["eval_every"] == 0):
                strategy.gather_model()
                if comm.rank == 0:
                    last = k == cfg["steps"]
                    evals.append([k, Task(data, strategy.model, "tok").evaluate(
                        cfg["final_batches" if last else "eval_batches"], cfg["eval_rows"])])

        ranks = free_run(comm, partial(build, {**cfg, **spec}, mesh, gpt()), batches, slowed_s,
                         evaluate)
        if ranks is not None:
            runs[spec["name"]].append({"ranks": ranks, "evals": evals})
    mesh.free()
    first = gpt().evaluate(cfg["eval_batches"], cfg["eval_rows"]) if comm.rank == 0 else None
    return {"floor": data.bayes_risk(), "initial": first, "runs": runs}
