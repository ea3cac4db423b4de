"""Stand-in pipeline stages that sleep a real GPT's measured forward and backward times."""

from __future__ import annotations

import statistics

import numpy as np

from ... import nn
from ...autograd import Function, Tensor
from ...nn.module import Module, Parameter, Sequential
from ...parallel.pipeline import partition
from ...parallel.pipeline.partition import parameter_counts
from ...train.task import Task
from ..standin import clock, pause

WIDTH = 16  # features of the activation each stand-in layer passes on


class Sleep(Function):
    """y = w·x after sleeping ``forward_s``; the backward sleeps ``backward_s``. A sleeping rank
    holds no core, so a schedule is timed apart from how many ranks share the machine's cores."""

    @staticmethod
    def forward(ctx, x, w, forward_s: float, backward_s: float):
        pause(forward_s)
        ctx.x, ctx.w, ctx.backward_s = x, w, backward_s
        return x * w  # (rows, WIDTH)

    @staticmethod
    def backward(ctx, g):
        pause(ctx.backward_s)
        need_x, need_w = ctx.needs_input_grad
        return (g * ctx.w if need_x else None,
                (g * ctx.x).sum().reshape(ctx.w.shape) if need_w else None)


class SleepLayer(Module):
    """(rows, WIDTH) → (rows, WIDTH): one scalar weight, a calibrated sleep each way."""

    def __init__(self, forward_s: float, backward_s: float):
        self.weight = Parameter(np.ones(1))
        self.forward_s, self.backward_s = forward_s, backward_s

    def forward(self, x):
        return Sleep.apply(x, self.weight, forward_s=self.forward_s, backward_s=self.backward_s)


class SleepModel(Module):
    """(rows, WIDTH) → (rows, WIDTH) logits through ``n_layers`` sleeping layers, the pipeline
    layers; each sleeps ``forward_s`` and ``backward_s`` per micro-batch."""

    def __init__(self, n_layers: int, forward_s: float, backward_s: float):
        self.layers = Sequential(*[SleepLayer(forward_s, backward_s) for _ in range(n_layers)])

    def pipeline_layers(self) -> list[Module]:
        return list(self.layers)

    def forward(self, x):
        return self.layers(x)


def sleep_batch(rows: int, gen: np.random.Generator):
    """A stand-in classification batch: x (rows, WIDTH) float64, y (rows,) class ids."""
    return gen.standard_normal((rows, WIDTH)), gen.integers(0, WIDTH, rows)


def gpt_task(cfg: dict) -> Task:
    """The GPT of ``cfg`` ("vocab", "seq", "d_model", "heads", "layers") in float32, from seed 0
    (every rank builds the same one), on the current device."""
    model = nn.GPT(cfg["vocab"], cfg["seq"], cfg["d_model"], cfg["heads"], cfg["layers"],
                   np.random.default_rng(0), dtype=np.float32)
    return Task(None, model, "tok")


def gpt_batch(cfg: dict, rows: int):
    """Random ids (rows, seq + 1) on the host, no padding: every position is a target."""
    return np.random.default_rng(1).integers(3, cfg["vocab"], (rows, cfg["seq"] + 1))


def calibrate(cfg: dict, p: int = 2) -> dict:
    """Forward and backward seconds of each stage of the GPT of ``cfg`` cut in ``p`` by
    parameters, on one micro-batch (``batch / m`` rows), in this process; a sleep stage sleeps
    the mean stage's."""
    task = gpt_task(cfg)
    ranges = partition(parameter_counts(task.model.pipeline_layers()), p)
    rows = cfg["batch"] // cfg["m"]
    times = stage_times(task, ranges, gpt_batch(cfg, rows), repeats=9)
    return {"stages": [{"layers": [r.start, r.stop], "forward_s": f, "backward_s": b}
                       for r, (f, b) in zip(ranges, times)],
            "forward_s": statistics.mean(f for f, _ in times),
            "backward_s": statistics.mean(b for _, b in times), "rows": rows}


def stage_times(task, ranges: list[range], batch, repeats: int) -> list[tuple[float, float]]:
    """(forward s, backward s) of each stage of ``task.model``'s pipeline layers cut by
    ``ranges``, on ``batch`` (one micro-batch): the median of ``repeats`` runs after one untimed
    run. As in a pipeline, a stage starts from its predecessor's output cut from the graph, and
    the last stage's forward includes the summed loss its backward starts from."""
    layers = task.model.pipeline_layers()
    stages = [Sequential(*[layers[i] for i in span]) for span in ranges]
    inputs, targets = task.split(batch)
    runs = []
    for _ in range(repeats + 1):
        task.model.zero_grad()
        xs, outs, seconds, h = [], [], [], inputs
        for k, stage in enumerate(stages):
            x = h if k == 0 else Tensor(h, requires_grad=True)
            start = clock()
            out = stage(x)
            if k == len(stages) - 1:
                out = task.output_loss(out, targets, "sum")
            seconds.append([clock() - start, 0.0])
            xs.append(x)
            outs.append(out)
            h = out.data
        for k in reversed(range(len(stages))):
            start = clock()
            outs[k].backward(None if k == len(stages) - 1 else xs[k + 1].grad)
            seconds[k][1] = clock() - start
        runs.append(seconds)
    return [(statistics.median(r[k][0] for r in runs[1:]),
             statistics.median(r[k][1] for r in runs[1:])) for k in range(len(stages))]
