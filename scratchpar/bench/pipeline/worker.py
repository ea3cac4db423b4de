"""The pipeline benchmark's ranks (sleep-stage schedules, the GPT's steps) and its calibration."""

from __future__ import annotations

import functools
import os
import re

import numpy as np

from ... import backend, nn, optim
from ...autograd import Tensor, Weights
from ...comm.mesh import Mesh
from ...data.shard import shard
from ...nn.module import Sequential
from ...parallel import DataParallel, PipeDream, Pipeline, SingleDevice
from ...parallel.pipeline import partition, schedules
from ...parallel.pipeline.partition import parameter_counts
from ...parallel.pipeline.stage import release
from ...timing import clock, medians, sync
from ...trace.chrome import write_chrome
from ...trace.tracer import Tracer
from ...train.task import Task
from ..standin import WIDTH, SleepModel, summed
from ..timing import accumulated, alone, stepping, turns

LR = 1e-3
COMPUTE = re.compile(r"[FBW]\d+(?:\.\d+)?$")  # the runtime's compute regions: F3, B3, W3, F3.1
sgd = functools.partial(optim.SGD, lr=LR)  # every contender's optimizer: plain SGD


def schedule_for(name: str, p: int, m: int, v: int, forward: float, backward: float,
                 weight: float):
    """Schedule ``name``; those placed by costs (interleaved, bprio, zb-h1) get these."""
    placed = {"interleaved": lambda: schedules.interleaved(p, m, v, forward, backward),
              "bprio": lambda: schedules.bprio(p, m, forward, backward),
              "zb-h1": lambda: schedules.zb_h1(p, m, forward, backward, weight)}
    return placed.get(name, lambda: schedules.build(name, p, m, v))()


def gpt_task(cfg: dict) -> Task:
    """The float32 GPT of ``cfg``, from seed 0 (every rank builds the same one)."""
    return Task(None, nn.GPT(cfg["vocab"], cfg["seq"], cfg["d_model"], cfg["heads"],
                             cfg["layers"], np.random.default_rng(0), dtype=np.float32), "tok")


def gpt_batch(cfg: dict, rows: int):
    """Random ids (rows, seq + 1) on the host, no padding: every position is a target."""
    return np.random.default_rng(1).integers(3, cfg["vocab"], (rows, cfg["seq"] + 1))


def calibrate(cfg: dict, p: int = 2, repeats: int = 9) -> dict:
    """Forward and backward seconds (medians) of each stage of the GPT of ``cfg`` cut in ``p``
    by parameters, on one micro-batch, and of backward the weights' gradients' share (computed
    apart, as a zero-bubble W); a sleep stage sleeps the mean stage's. As in a pipeline, a stage
    starts from its predecessor's output cut from the graph; the last one's includes the loss."""
    task = gpt_task(cfg)
    layers = task.model.pipeline_layers()
    ranges = partition(parameter_counts(layers), p)
    stages = [Sequential(*[layers[i] for i in span]) for span in ranges]
    rows = cfg["batch"] // cfg["m"]
    inputs, targets = task.split(gpt_batch(cfg, rows))

    def run() -> list[float]:  # [F₀, B₀, W₀, F₁, B₁, W₁, …]
        task.model.zero_grad()
        xs, outs, seconds, h = [], [], [0.0] * 3 * p, inputs
        for k, stage in enumerate(stages):
            x = h if k == 0 else Tensor(h, requires_grad=True)
            start = clock()
            out = stage(x)
            if k == p - 1:
                out = task.output_loss(out, targets, "sum")
            seconds[3 * k] = clock() - start
            xs.append(x)
            outs.append(out)
            h = out.data
        for k in reversed(range(p)):  # B, then W: the weights' gradients apart
            start = clock()
            weights = Weights(stages[k].parameters())
            outs[k].backward(None if k == p - 1 else xs[k + 1].grad, hooks=weights)
            seconds[3 * k + 1] = clock() - start
            start = clock()
            weights.run()
            seconds[3 * k + 2] = clock() - start
        return seconds

    times = medians(run, repeats)
    forward, inputs_b, weight = times[0::3], times[1::3], times[2::3]
    backward = [b + w for b, w in zip(inputs_b, weight)]
    return {"stages": [{"layers": [r.start, r.stop], "forward_s": f, "backward_s": b,
                        "weight_s": w} for r, f, b, w in zip(ranges, forward, backward, weight)],
            "forward_s": sum(forward) / p, "backward_s": sum(backward) / p,
            "weight_s": sum(weight) / p, "rows": rows}


def summary(events) -> tuple[float, float, float]:
    """(first F's start, last B's or W's end, Σ compute durations), s, of one rank's step."""
    computes = [e for e in events if COMPUTE.match(e.name)]
    return (min(e.start for e in computes if e.name[0] == "F") * 1e-9,
            max(e.end for e in computes if e.name[0] != "F") * 1e-9,
            sum(e.end - e.start for e in computes) * 1e-9)


def bubble(summaries: list[tuple[float, float, float]]) -> tuple[float, float]:
    """(bubble, window s) of one step from every rank's :func:`summary`, clocks aligned at its
    start: the idle fraction 1 − Σ_ranks busy / (p · window) of the window across ranks."""
    start = min(s for s, _, _ in summaries)
    window = max(e for _, e, _ in summaries) - start
    return 1 - sum(b for _, _, b in summaries) / (len(summaries) * window), window


def sleep_run(comm, spec: dict, run: dict) -> dict | None:
    """``spec``'s steps of schedule ``run`` on p·v sleeping layers, one per virtual stage, each
    a v-th of a stage's time (polled where each rank has a core). Rank 0 returns the per-step
    bubbles and every rank's peaks, and with ``trace`` writes the last step's Chrome trace."""
    p, m, v = comm.size, run["m"], run["v"]
    f, b, w = (spec[k] for k in ("forward_s", "backward_s", "weight_s"))
    apart = w if run["schedule"] == "zb-h1" else 0.0  # B and W apart
    spin = comm.local_size <= len(os.sched_getaffinity(0))  # a core each: compute, not sleep
    model = SleepModel(p * v, f / v, b / v, apart / v, spin)
    comm.tracer = tracer = Tracer(comm.rank)  # before the mesh: its splits and dups share it
    mesh = Mesh(comm, dp=1, pp=p)
    cls = PipeDream if run["schedule"] == "pipedream" else Pipeline
    task = Task(None, model, "sample", criterion=summed)
    pipe = cls(model, sgd, task, mesh, schedule=schedule_for(run["schedule"], p, m, v, f, b, w),
               ranges=[range(k, k + 1) for k in range(p * v)])
    gen = np.random.default_rng(0)  # a stand-in classification batch: x (rows, WIDTH), y (rows,)
    batch = gen.standard_normal((spec["rows"] * m, WIDTH)), gen.integers(0, WIDTH, spec["rows"] * m)
    steps = []  # each step's events
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
    name = run["schedule"] + (f"_v{v}" if v > 1 else "") + f"_p{p}_m{m}"
    per_step = [bubble(list(s)) for s in zip(*(r["summaries"] for r in ranks))]
    return {**run, "p": p, "held": "polled" if spin else "slept",
            "bubbles": [x for x, _ in per_step], "windows_s": [span for _, span in per_step],
            "peak": [r["peak"] for r in ranks], "peak_bytes": [r["peak_bytes"] for r in ranks],
            "trace": write_chrome(os.path.join(spec["traces"], f"pipeline_{name}.trace.json"),
                                  [r["trace"] for r in ranks]) if run["trace"] else None}


def sleep_runs(comm, cfg: dict) -> list:
    """Every run of ``cfg["runs"]`` on the sleep stages."""
    return [sleep_run(comm, cfg, run) for run in cfg["runs"]]


def real_runs(comm, cfg: dict) -> dict[str, object]:
    """Seconds per step (slowest rank, median) of the GPT on one device (rank 0 alone, on the
    batch and on m accumulated micro-batches; its time includes a waiter's wake-up, ≤ 0.2 ms),
    data parallel, and pipelined: naive (m = 1), GPipe, 1F1B and ZB-H1; each on its own copy,
    taking turns; and per rank of each pipeline, what it holds at the last step's peak: its
    parameter bytes against the whole model's, its micro-batches and their boundary bytes."""
    batch = backend.to_device(gpt_batch(cfg, cfg["batch"]))
    one, micro, data = gpt_task(cfg), gpt_task(cfg), gpt_task(cfg)
    meshes = [Mesh(comm)]  # the data-parallel one, then each pipeline's
    contenders = {
        "alone": alone(stepping(SingleDevice(one.model, sgd, one), batch), comm),
        "alone-micro": alone(accumulated(
            micro.model, sgd(micro.model.parameters()), micro.loss,
            [shard(batch, i, cfg["m"]) for i in range(cfg["m"])], micro.count(batch)), comm),
        "dp": stepping(DataParallel(data.model, sgd, data, meshes[0]), batch)}
    pipes = {}
    for name, m in (("naive", 1), ("gpipe", cfg["m"]), ("1f1b", cfg["m"]), ("zb-h1", cfg["m"])):
        task = gpt_task(cfg)
        whole = sum(p.data.nbytes for p in task.model.parameters())
        meshes.append(Mesh(comm, pp=comm.size))
        pipes[name] = Pipeline(task.model, sgd, task, meshes[-1],
                               schedule=schedules.build(name, comm.size, m))
        release(task.model, pipes[name].params)  # a rank keeps its stage, as in a run
        contenders[name] = stepping(pipes[name], batch)
    timed, memory = turns(comm, contenders, cfg), []
    for name, pipe in pipes.items():
        mine = {"param_bytes": sum(p.data.nbytes for p in pipe.params),
                "peak": pipe.runtime.peak, "peak_bytes": pipe.runtime.peak_bytes}
        for r, rank in enumerate(comm.allgather_obj(mine, "pipeline memory")):
            memory.append({"contender": name, "rank": r, **rank, "model_bytes": whole,
                           "share": rank["param_bytes"] / whole})
        pipe.close()
    for mesh in meshes:
        mesh.free()
    return {"timed": timed, "memory": memory}
