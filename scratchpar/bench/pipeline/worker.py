"""The pipeline benchmark's ranks (sleep-stage schedules, the GPT's steps) and its calibration."""

from __future__ import annotations

import functools
import os
import re
import statistics

import numpy as np

from ... import backend, nn, optim
from ...autograd import Tensor, Weights
from ...comm.mesh import Mesh
from ...data.shard import shard
from ...nn.module import Sequential
from ...parallel import DataParallel, PipeDream, Pipeline, SingleDevice
from ...parallel.pipeline import partition, schedules, simulate
from ...parallel.pipeline.partition import parameter_counts
from ...parallel.pipeline.simulator import bubble_formula
from ...parallel.pipeline.stage import release
from ...timing import clock, medians, sync
from ...trace.chrome import write_chrome
from ...trace.tracer import Tracer
from ...train.task import Task
from ..standin import WIDTH, SleepModel, summed
from ..timing import accumulated, alone, stepping, turns

COMPUTE = re.compile(r"[FBW]\d+(?:\.\d+)?$")  # the runtime's compute regions: F3, B3, W3, F3.1
sgd = functools.partial(optim.SGD, lr=1e-3)  # every contender's optimizer: plain SGD


def schedule_for(name: str, p: int, m: int, v: int, forward: float, backward: float,
                 weight: float):
    """Schedule ``name``; those placed by costs (interleaved, bprio, zb-h1) get these."""
    placed = {"interleaved": lambda: schedules.interleaved(p, m, v, forward, backward),
              "bprio": lambda: schedules.bprio(p, m, forward, backward),
              "zb-h1": lambda: schedules.zb_h1(p, m, forward, backward, weight)}
    return placed.get(name, lambda: schedules.build(name, p, m, v))()


def trace_name(schedule: str, p: int, m: int, v: int) -> str:
    """The file name of a run's Chrome trace; its timeline's is the same, ``.png``."""
    return f"pipeline_{schedule}" + (f"_v{v}" if v > 1 else "") + f"_p{p}_m{m}.trace.json"


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

    def run() -> tuple[float, ...]:  # (F₀ … F_p−1, B₀ … B_p−1, W₀ … W_p−1)
        task.model.zero_grad()
        xs, outs, f, b, w = [inputs], [], [0.0] * p, [0.0] * p, [0.0] * p
        for k, stage in enumerate(stages):
            start = clock()
            out = stage(xs[k])
            outs.append(task.output_loss(out, targets, "sum") if k == p - 1 else out)
            f[k] = clock() - start
            xs.append(Tensor(out.data, requires_grad=True))
        for k in reversed(range(p)):  # B, then W: the weights' gradients apart
            weights, start = Weights(stages[k].parameters()), clock()
            outs[k].backward(None if k == p - 1 else xs[k + 1].grad, hooks=weights)
            middle = clock()
            weights.run()
            end = clock()
            b[k], w[k] = end - start, end - middle
        return (*f, *b, *w)

    times = medians(run, repeats)
    f, b, w = (times[i * p:(i + 1) * p] for i in range(3))
    return {"stages": [{"layers": [r.start, r.stop], "forward_s": x, "backward_s": y,
                        "weight_s": z} for r, x, y, z in zip(ranges, f, b, w)],
            "forward_s": sum(f) / p, "backward_s": sum(b) / p, "weight_s": sum(w) / p,
            "rows": rows}


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


def sleep_runs(comm, spec: dict) -> list:
    """``spec``'s steps of each schedule of ``spec["runs"]`` on p·v sleeping layers, one per
    virtual stage, each a v-th of a stage's time (polled where each rank has a core). Rank 0
    returns per run its median bubble and idle seconds per rank over the steps, every rank's
    peaks, and the simulator's (ideal) bubble, stash and idle ms per micro-batch beyond it; with
    ``trace``, it writes the last step's Chrome trace."""
    p, found = comm.size, []
    f, b, w = (spec[k] for k in ("forward_s", "backward_s", "weight_s"))
    spin = comm.local_size <= len(os.sched_getaffinity(0))  # a core each: compute, not sleep
    for run in spec["runs"]:
        m, v = run["m"], run["v"]
        apart = w if run["schedule"] == "zb-h1" else 0.0  # B and W apart
        model = SleepModel(p * v, f / v, b / v, apart / v, spin)
        comm.tracer = tracer = Tracer(comm.rank)  # before the mesh: its splits and dups share it
        mesh = Mesh(comm, dp=1, pp=p)
        cls = PipeDream if run["schedule"] == "pipedream" else Pipeline
        schedule = schedule_for(run["schedule"], p, m, v, f, b, w)
        pipe = cls(model, sgd, Task(None, model, "sample", criterion=summed), mesh,
                   schedule=schedule, ranges=[range(k, k + 1) for k in range(p * v)])
        gen = np.random.default_rng(0)  # a stand-in classification batch: x (rows, WIDTH), y
        rows = spec["rows"] * m
        batch = gen.standard_normal((rows, WIDTH)), gen.integers(0, WIDTH, rows)
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
            continue
        if run["trace"]:
            write_chrome(os.path.join(spec["traces"], trace_name(run["schedule"], p, m, v)),
                         [r["trace"] for r in ranks])
        per_step = [bubble(list(s)) for s in zip(*(r["summaries"] for r in ranks))]
        idle = statistics.median(x * span for x, span in per_step)
        ideal = simulate(schedule, f, b, w)  # GPipe's, 1F1B's, interleaved's: bubble_formula
        found.append({**run, "p": p, "bubble": statistics.median(x for x, _ in per_step),
                      "idle_s": idle, "simulated": ideal.bubble,
                      "formula": bubble_formula(p, m, v),
                      "simulated_peak": [ideal.peak_stash[s] for s in range(p)],
                      "extra_ms": 1e3 * (idle - ideal.bubble * ideal.makespan) / m,
                      "peak": [r["peak"] for r in ranks],
                      "peak_bytes": [r["peak_bytes"] for r in ranks]})
    return found if comm.rank == 0 else None


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
