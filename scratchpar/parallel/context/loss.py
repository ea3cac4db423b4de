"""A whole-model strategy's loss under context parallelism: each rank of a cp group scores its
positions of its replica's rows, and the units are counted once per group, so that the sums
over every rank are one device's (the loss over dp × cp, N over dp)."""

from __future__ import annotations

from ...backend import get_array_module
from .layout import Context


def columns(x, y, context: Context):
    """Inputs ``x`` and targets ``y`` (B, T) cut to the columns of this rank's positions:
    (B, T/cp) each."""
    mine = get_array_module(x).asarray(context.mine(x.shape[1]))  # (T/cp,)
    return x[:, mine], y[:, mine]


def cut(objective, batch, context: Context):
    """(inputs, targets) of ``batch`` (the objective's ``split``), cut to this rank's
    positions (:func:`columns`)."""
    return columns(*objective.split(batch), context)


def context_loss(objective, model, batch, context: Context):
    """This rank's summed loss on its positions of ``batch`` (a Tensor), and the units of the
    whole rows on the group's rank 0 (0 elsewhere)."""
    x, y = cut(objective, batch, context)
    loss = objective.output_loss(model(x), y, "sum")
    return loss, objective.count(batch) if context.comm.rank == 0 else 0


def context_score(task, model, batch, context: Context) -> tuple:
    """``task.score``'s figures on this rank's positions of ``batch``: the summed loss (a
    language model labels nothing, so 0 right)."""
    x, y = cut(task, batch, context)
    return task.output_loss(model(x), y, "sum").data, 0
