"""One rank of the pipeline benchmark: sleep-stage schedules traced, a GPT's step timed in turns."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ... import backend, optim
from ...comm.mesh import Mesh
from ...data.shard import shard
from ...parallel import DataParallel, PipeDream, Pipeline, SingleDevice
from ...parallel.pipeline import partition, schedules
from ...parallel.pipeline.partition import parameter_counts
from ...trace.chrome import write_chrome
from ...trace.tracer import Tracer
from ...train.task import Task
from ..timing import Timed, alone, sync, turns
from .report import schedule_for
from .stages import SleepModel, gpt_batch, gpt_task, sleep_batch

LR = 1e-3
COMPUTE = re.compile(r"[FB]\d+(?:\.\d+)?$")  # the runtime's compute regions: F3, B3, F3.1


def summary(events) -> tuple[float, float, float]:
    """(first F's start, last B's end, Σ F and B durations), seconds, of one rank's step."""
    computes = [e for e in events if COMPUTE.match(e.name)]
    return (min(e.start for e in computes if e.name[0] == "F") * 1e-9,
            max(e.end for e in computes if e.name[0] == "B") * 1e-9,
            sum(e.end - e.start for e in computes) * 1e-9)


def bubble(summaries: list[tuple[float, float, float]]) -> tuple[float, float]:
    """(bubble, window s) of one step from every rank's :func:`summary`, on clocks aligned at
    the step's start: over the window from the first F's start to the last B's end across
    ranks, the idle fraction 1 − Σ_ranks busy / (p · window)."""
    start = min(s for s, _, _ in summaries)
    window = max(e for _, e, _ in summaries) - start
    return 1 - sum(b for _, _, b in summaries) / (len(summaries) * window), window


def sleep_run(comm, spec: dict, run: dict) -> dict | None:
    """``spec``'s warm-up and timed steps of schedule ``run`` on p·v sleeping layers, one per
    virtual stage, each sleeping a v-th of a stage's time. Rank 0 returns the per-step bubbles
    and every rank's peak activations; with ``trace``, it writes the last step's Chrome trace
    into ``spec["traces"]``."""
    p, m, v = comm.size, run["m"], run["v"]
    model = SleepModel(p * v, spec["forward_s"] / v, spec["backward_s"] / v)
    comm.tracer = tracer = Tracer(comm.rank)  # before the mesh: its splits and dups share it
    mesh = Mesh(comm, dp=1, pp=p)
    cls = PipeDream if run["schedule"] == "pipedream" else Pipeline
    pipe = cls(model, lambda params: optim.SGD(params, LR), Task(None, model, "sample"), mesh,
               schedule_for(run["schedule"], p, m, v, spec["forward_s"], spec["backward_s"]),
               [range(k, k + 1) for k in range(p * v)])
    batch = sleep_batch(spec["rows"] * m, np.random.default_rng(0))
    steps = []
    for _ in range(spec["warmup"] + spec["steps"]):
        tracer.align(lambda: sync(comm))  # each step's zero at a barrier on every rank
        mark = len(tracer.events)
        pipe.step(batch)
        steps.append(tracer.events[mark:])
    mine = {"summaries": [summary(s) for s in steps[spec["warmup"]:]],
            "peak": pipe.runtime.peak, "peak_bytes": pipe.runtime.peak_bytes,
            "trace": {**tracer.export(), "events": [e._asdict() for e in steps[-1]]}
            if run["trace"] else None}
    ranks = comm.allgather_obj(mine, "pipeline bench results")
    pipe.close()
    mesh.free()
    comm.tracer = None
    if comm.rank:
        return None
    path = None
    if run["trace"]:
        name = run["schedule"] + (f"_v{v}" if v > 1 else "")
        path = write_chrome(str(Path(spec["traces"]) / f"pipeline_{name}_p{p}_m{m}.trace.json"),
                            [r["trace"] for r in ranks])
    per_step = [bubble(list(s)) for s in zip(*(r["summaries"] for r in ranks))]
    return {**run, "p": p, "bubbles": [b for b, _ in per_step],
            "windows_s": [w for _, w in per_step], "peak": [r["peak"] for r in ranks],
            "peak_bytes": [r["peak_bytes"] for r in ranks], "trace": path}


def accumulated(task, batch, m: int) -> Timed:
    """One device's step on ``m`` micro-batches: their summed losses' gradients accumulated,
    scaled by 1/N, one update; a pipeline's arithmetic on one device."""
    params = task.model.parameters()
    optimizer, micro = optim.SGD(params, LR), [shard(batch, i, m) for i in range(m)]
    scale = 1.0 / task.count(batch)

    def step():
        optimizer.zero_grad()
        for part in micro:
            task.loss(task.model, part, "sum").backward()
        for p in params:
            p.grad *= scale
        optimizer.step()

    return Timed(step, backend.sync)


def real_runs(comm, cfg: dict) -> dict:
    """Seconds per step (slowest rank, median) of the GPT on one device (rank 0 alone, on the
    whole batch and on m accumulated micro-batches), data parallel over the ranks, and
    pipelined over them: naive (m = 1), GPipe and 1F1B (m); each contender on its own copy of
    the model, all taking turns. The other ranks sleep through the one-device steps; the
    accumulated one's time is the slowest rank's, which includes a waiter's wake-up (≤ 0.2 ms)."""
    batch = backend.to_device(gpt_batch(cfg, cfg["batch"]))
    contenders, live = {}, []
    single = gpt_task(cfg)
    one = SingleDevice(single.model, optim.SGD(single.model.parameters(), LR), single.loss)
    contenders["alone"] = alone(Timed(lambda: one.step(batch), backend.sync), comm)
    contenders["alone-micro"] = alone(accumulated(gpt_task(cfg), batch, cfg["m"]), comm)
    dp_task = gpt_task(cfg)
    dp = DataParallel(dp_task.model, optim.SGD(dp_task.model.parameters(), LR), dp_task.loss,
                      dp_task.count, comm)
    contenders["dp"] = Timed(lambda: dp.step(batch), backend.sync)
    pipes = {}
    for name, m in (("naive", 1), ("gpipe", cfg["m"]), ("1f1b", cfg["m"])):
        task = gpt_task(cfg)
        whole = sum(p.data.nbytes for p in task.model.parameters())
        mesh = Mesh(comm, dp=1, pp=comm.size)
        ranges = partition(parameter_counts(task.model.pipeline_layers()), comm.size)
        pipes[name] = pipe = Pipeline(task.model, lambda params: optim.SGD(params, LR), task,
                                      mesh, schedules.build(name, comm.size, m), ranges)
        contenders[name] = Timed(lambda pipe=pipe: pipe.step(batch), backend.sync)
        live += [pipe.close, mesh.free]
    timed = turns(comm, contenders, cfg["repeats"], cfg["warmup"])
    for name, pipe in pipes.items():  # what each rank really holds, at the last step's peak
        held = sum(p.data.nbytes for p in pipe.params)
        timed[name]["memory"] = {"model_bytes": whole, "per_rank": comm.allgather_obj(
            {"param_bytes": held, "peak": pipe.runtime.peak,
             "peak_bytes": pipe.runtime.peak_bytes}, "pipeline memory")}
    for free in live:
        free()
    return timed


def sleep_runs(comm, cfg: dict) -> list:
    """Every run of ``cfg["runs"]`` on the sleep stages."""
    return [sleep_run(comm, cfg, run) for run in cfg["runs"]]
