"""Stand-in compute: a sleep of the real compute's measured time, beyond the machine's cores.

- :class:`SleepingTask`: a task whose loss sleeps its rows' share of the real model's time and
  is linear in the model's parameters, so that a strategy moves and updates real parameters,
  gradients and optimizer state: a plain MLP's (:func:`sleeping_mlp`, the asynchronous and
  parameter-server benchmarks) or the training command's own run (:func:`build_sleeping`, the
  planner's validation);
- :class:`SleepModel`: pipeline layers that sleep each way (the pipeline benchmarks).
"""

from __future__ import annotations

import time
from dataclasses import KW_ONLY, dataclass

import numpy as np

from .. import nn
from ..autograd import Function, Tensor
from ..autograd import functional as F
from ..backend import get_array_module, rng, to_device
from ..data.shard import rows
from ..nn.module import Module, Parameter, Sequential
from ..timing import clock, medians
from ..train.build import assemble, prepare
from ..train.task import Task

SPIN_S = 1e-3  # the end of a pause is spun, not slept: the kernel wakes a sleeper late
GRADIENT_SCALE = 1e-3  # dᵢ ~ N(0, 10⁻⁶): SGD moves the parameters a little, nothing diverges
WIDTH = 16  # features of the activation each sleeping pipeline layer passes on


def pause(seconds: float, spin: bool = False) -> None:
    """Hold for ``seconds``: asleep (no core) until the last ``SPIN_S``, then polling the clock,
    since a plain ``time.sleep`` overshoots by 0.15–0.5 ms, more than the runtime costs that
    the benchmarks measure. With ``spin``, poll the whole time, as a rank with a core of its own
    would compute: on this machine a self-message and a small product after 11 ms of NumPy
    work took 54 µs, after 11 ms of polling 53, after this sleep 127 (7 warm)."""
    deadline = time.perf_counter() + seconds
    if seconds > SPIN_S and not spin:
        time.sleep(seconds - SPIN_S)
    while time.perf_counter() < deadline:
        pass


class SleepLinear(Function):
    """L = scale · Σᵢ ⟨dᵢ, pᵢ⟩ after sleeping ``forward_s``; the backward sleeps ``backward_s``
    and gives parameter i the gradient g · scale · dᵢ (a new array, as a real backward's)."""

    @staticmethod
    def forward(ctx, *params, directions, scale: float, forward_s: float, backward_s: float):
        pause(forward_s)
        ctx.directions, ctx.scale, ctx.backward_s = directions, scale, backward_s
        xp = get_array_module(*params)
        total = sum(xp.vdot(d.ravel(), p.ravel()) for d, p in zip(directions, params))
        return xp.asarray(scale * total, dtype=params[0].dtype)  # ()

    @staticmethod
    def backward(ctx, g):
        pause(ctx.backward_s)
        return tuple(g * ctx.scale * d for d in ctx.directions)


@dataclass
class SleepingTask(Task):
    """A task whose loss over a batch sleeps ``per_row_s`` seconds a row, ``forward_share`` of
    it forward and the rest backward, and is :class:`SleepLinear` over the model's parameters,
    L = s · Σᵢ ⟨dᵢ, pᵢ⟩ with fixed small dᵢ of each parameter's shape and dtype (s = 1 for the
    mean, the batch's units for the sum): every gradient is exact."""

    _: KW_ONLY
    per_row_s: float
    forward_share: float

    def __post_init__(self):
        super().__post_init__()
        gen = rng(0, 7)
        self.directions = tuple(
            to_device((GRADIENT_SCALE * gen.standard_normal(p.shape)).astype(p.data.dtype))
            for p in self.model.parameters())

    def loss(self, model, batch, reduction: str = "mean") -> Tensor:
        """The batch's loss L, a 0-d Tensor, after sleeping its rows' forward share; its
        backward sleeps the rest."""
        seconds = rows(batch) * self.per_row_s
        return SleepLinear.apply(*model.parameters(), directions=self.directions,
                                 scale=float(self.count(batch)) if reduction == "sum" else 1.0,
                                 forward_s=self.forward_share * seconds,
                                 backward_s=(1 - self.forward_share) * seconds)


def sleeping_mlp(cfg: dict) -> SleepingTask:
    """The float32 MLP ``cfg["sizes"]`` (seed 0) as a task without data (a batch: a tuple of
    arrays, a row a sample) whose loss sleeps the time :func:`calibrated` put in ``cfg``
    (``per_row_s``, ``forward_share``)."""
    model = nn.MLP(cfg["sizes"], np.random.default_rng(0), dtype=np.float32)
    return SleepingTask(None, model, "sample", per_row_s=cfg["per_row_s"],
                        forward_share=cfg["forward_share"])


def calibrate(sizes: list[int], rows: int, repeats: int = 7) -> dict:
    """The real float32 MLP ``sizes`` (cross-entropy) timed on ``rows`` random rows in this
    process: its sizes, the rows, the median forward and backward seconds, the stand-in's
    per-row time and forward share, and the parameter count."""
    model = nn.MLP(sizes, np.random.default_rng(0), dtype=np.float32)
    gen = np.random.default_rng(1)
    x = Tensor(to_device(gen.standard_normal((rows, sizes[0])).astype(np.float32)))  # (B, D)
    y = to_device(gen.integers(0, sizes[-1], rows))  # (B,)

    def run():
        model.zero_grad()
        start = clock()
        loss = F.cross_entropy(model(x), y)
        middle = clock()
        loss.backward()
        return middle - start, clock() - middle

    forward, backward = medians(run, repeats)
    return {"sizes": sizes, "rows": rows, "forward_s": forward, "backward_s": backward,
            "per_row_s": (forward + backward) / rows,
            "forward_share": forward / (forward + backward),
            "parameters": sum(p.size for p in model.parameters())}


def calibrated(cfg: dict, sizes: list[int], rows: int) -> tuple[dict, dict]:
    """``cfg`` with the stand-in of the MLP ``sizes`` calibrated at ``rows`` rows, and the
    calibration."""
    calib = calibrate(sizes, rows)
    return {**cfg, "per_row_s": calib["per_row_s"],
            "forward_share": calib["forward_share"]}, calib


def calibration_line(part: str, calib: dict) -> str:
    """The line a benchmark prints of the stand-in it calibrated for ``part``: the MLP, its
    parameter count K, the rows it was timed on and the time per row."""
    return (f"stand-in compute ({part}): MLP {'→'.join(map(str, calib['sizes']))} "
            f"(K = {calib['parameters']:,}) calibrated on the CPU at {calib['rows']} rows: "
            f"{1e6 * calib['per_row_s']:.2f} µs per row")


# The strategies that call the task's loss on the whole model. ZeRO-3 gathers each layer's
# parameters in that layer's forward, which a stand-in never calls; a pipeline and a hybrid
# run their stages' layers themselves.
WHOLE = {"dp", "dp-naive", "local-sgd", "zero", "ps", "hogwild", "easgd"}


def stands_in(cfg) -> bool:
    """Whether a layout's compute can be stood in for: its strategy runs the whole model
    through the task's loss."""
    t = cfg.train
    return t.strategy in WHOLE and not (t.strategy == "zero" and t.zero_stage == 3)


def build_sleeping(cfg, comm, rows: int, forward_s: float, backward_s: float):
    """The training command's Trainer for ``cfg`` on this rank, its task a
    :class:`SleepingTask` that sleeps as the model's forward and backward took on ``rows``
    rows, pro rata."""
    parts = prepare(cfg, comm)
    task = parts.task
    parts.task = SleepingTask(task.dataset, task.model, task.unit, task.criterion, task.measure,
                              task.scaler, per_row_s=(forward_s + backward_s) / rows,
                              forward_share=forward_s / (forward_s + backward_s))
    return assemble(cfg, parts)


class Sleep(Function):
    """y = w·x after sleeping ``forward_s``. The backward sleeps ``backward_s``: the input's
    gradient ``backward_s − weight_s``, the weight's ``weight_s``, so that a zero-bubble
    pipeline's B and W each sleep their part. A sleeping rank holds no core, so a schedule is
    timed apart from how many ranks share the machine's cores; with ``spin`` (each rank has a
    core) it polls instead, which leaves the caches as real compute does (:func:`pause`)."""

    @staticmethod
    def forward(ctx, x, w, forward_s: float, backward_s: float, weight_s: float = 0.0,
                spin: bool = False):
        pause(forward_s, spin)
        ctx.x, ctx.w, ctx.backward_s, ctx.weight_s, ctx.spin = x, w, backward_s, weight_s, spin
        return x * w  # (rows, WIDTH)

    @staticmethod
    def backward(ctx, g):
        need_x, need_w = ctx.needs_input_grad
        pause((ctx.backward_s - ctx.weight_s) * need_x + ctx.weight_s * need_w, ctx.spin)
        return (g * ctx.w if need_x else None,
                (g * ctx.x).sum().reshape(ctx.w.shape) if need_w else None)


class SleepLayer(Module):
    """(rows, WIDTH) → (rows, WIDTH): one scalar weight, a calibrated sleep each way. Its input
    always takes a gradient, as a real stage's activations do, the first stage's too."""

    def __init__(self, forward_s: float, backward_s: float, weight_s: float = 0.0,
                 spin: bool = False):
        self.weight = Parameter(np.ones(1))
        self.forward_s, self.backward_s, self.weight_s = forward_s, backward_s, weight_s
        self.spin = spin

    def forward(self, x):
        if not (isinstance(x, Tensor) and x.requires_grad):
            x = Tensor(x.data if isinstance(x, Tensor) else x, requires_grad=True)
        return Sleep.apply(x, self.weight, forward_s=self.forward_s, backward_s=self.backward_s,
                           weight_s=self.weight_s, spin=self.spin)


def summed(out, targets, reduction: str = "sum") -> Tensor:
    """A sleep pipeline's loss: the outputs' sum, one op. The calibrated sleeps already hold the
    real model's head and loss, a share of every stage's; a cross-entropy on top, some 30 ops
    run cold after a sleep, made the last stage 0.17 ms a micro-batch slower than the others,
    and every other stage waited for it."""
    total = out.sum()
    return total if reduction == "sum" else total / len(targets)


class SleepModel(Module):
    """(rows, WIDTH) → (rows, WIDTH) logits through ``n_layers`` sleeping layers, the pipeline
    layers; each sleeps ``forward_s`` and ``backward_s`` per micro-batch, ``weight_s`` of it
    for its weight's gradient; with ``spin``, polls that long instead (:class:`Sleep`)."""

    def __init__(self, n_layers: int, forward_s: float, backward_s: float,
                 weight_s: float = 0.0, spin: bool = False):
        self.layers = Sequential(*[SleepLayer(forward_s, backward_s, weight_s, spin)
                                   for _ in range(n_layers)])

    def pipeline_layers(self) -> list[Module]:
        return list(self.layers)

    def forward(self, x):
        return self.layers(x)
