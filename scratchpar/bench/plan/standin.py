"""Stand-in compute for the planner's validation beyond this machine's cores: the run's own
model, optimizer, data and messages, built by the training command's path, with the model's
forward and backward replaced by sleeps of their time measured on one free core."""

from __future__ import annotations

from dataclasses import dataclass

from ...backend import rng, to_device
from ...train.build import assemble, prepare
from ...train.task import Task
from ..standin import GRADIENT_SCALE, SleepLinear

# The strategies that call the task's loss on the whole model. ZeRO-3 gathers each layer's
# parameters in that layer's forward, which a stand-in never calls; a pipeline and a hybrid
# run their stages' layers themselves.
WHOLE = {"dp", "dp-naive", "local-sgd", "zero", "ps", "hogwild", "easgd"}


def stands_in(cfg) -> bool:
    """Whether a layout's compute can be stood in for: its strategy runs the whole model
    through the task's loss."""
    t = cfg.train
    return t.strategy in WHOLE and not (t.strategy == "zero" and t.zero_stage == 3)


@dataclass
class SleepingTask(Task):
    """A task whose loss over a batch sleeps ``per_row`` (forward, backward) seconds a row and
    is linear in the parameters (``bench/standin.py: SleepLinear``): the strategy moves and
    updates the real model's parameters, gradients and optimizer state."""

    per_row: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self):
        gen = rng(0, 7)
        self._directions = tuple(to_device((GRADIENT_SCALE * gen.standard_normal(p.shape))
                                           .astype(p.data.dtype))
                                 for p in self.model.parameters())

    def loss(self, model, batch, reduction: str = "mean"):
        rows = len(batch[-1] if isinstance(batch, tuple) else batch)
        scale = float(self.count(batch)) if reduction == "sum" else 1.0
        return SleepLinear.apply(*model.parameters(), directions=self._directions, scale=scale,
                                 forward_s=rows * self.per_row[0],
                                 backward_s=rows * self.per_row[1])


def build_sleeping(cfg, comm, rows: int, forward_s: float, backward_s: float):
    """The training command's Trainer for ``cfg`` on this rank, its task's loss a stand-in that
    sleeps as the model's forward and backward took on ``rows`` rows, pro rata."""
    parts = prepare(cfg, comm)
    task = parts.task
    parts.task = SleepingTask(task.dataset, task.model, task.unit, task.criterion, task.measure,
                              task.scaler, per_row=(forward_s / rows, backward_s / rows))
    return assemble(cfg, parts)
