"""What a strategy trains for: a batch's summed loss and the units it was summed over."""

from __future__ import annotations

import inspect
from typing import Protocol, runtime_checkable

EXAMPLE = '''class Objective:
    def loss(self, model, batch, reduction):  # reduction: "sum" or "mean"
        x, y = batch
        return F.cross_entropy(model(x), y, reduction=reduction)
    def count(self, batch):  # the units the summed loss adds up: here samples
        return len(batch[1])'''


@runtime_checkable
class Objective(Protocol):
    """``loss(model, batch, reduction)``: the batch's loss, a scalar Tensor; every strategy
    calls it with ``reduction="sum"``, so that each rank sums its rows and the strategy divides
    by N, the units of the global batch, which ``count(batch)`` gives a part at a time (tokens,
    samples: an int or a 0-d array). One device's mean gradient is then ∇(Σᵣ Lᵣ)/N whatever
    the rows each rank holds. A :class:`~scratchpar.train.task.Task` is one; so is any object
    with these two methods."""

    def loss(self, model, batch, reduction: str): ...

    def count(self, batch): ...


@runtime_checkable
class Staged(Objective, Protocol):
    """What a pipeline needs beside: ``split(batch)`` into (inputs, targets), the first
    stage's input and what the last stage's output is scored against, and
    ``output_loss(out, targets, reduction)``, the loss of that output."""

    def split(self, batch): ...

    def output_loss(self, out, targets, reduction: str): ...


def require(objective, staged: bool = False) -> None:
    """Refuse, in words, an objective without the methods a strategy calls, or whose loss
    cannot take ``reduction="sum"``."""
    needed = Staged if staged else Objective
    if not isinstance(objective, needed):
        missing = [name for name in ("loss", "count", "split", "output_loss")[:4 if staged else 2]
                   if not callable(getattr(objective, name, None))]
        raise TypeError(f"the objective {type(objective).__name__} has no {' or '.join(missing)}"
                        f": a strategy calls loss(model, batch, reduction) and count(batch)"
                        + (", and a pipeline split(batch) and output_loss(out, targets, "
                           "reduction)" if staged else "") + f". For example:\n{EXAMPLE}")
    for name in ("loss", "output_loss")[:2 if staged else 1]:
        takes_reduction(getattr(objective, name), f"the objective's {name}")


def takes_reduction(fn, name: str, arguments: int = 2) -> None:
    """Refuse, in words, a ``fn`` (called ``name``) that cannot take its ``arguments`` and
    ``reduction="sum"``; accept it where Python cannot tell (a builtin)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*[None] * arguments, reduction="sum")
    except TypeError:
        raise TypeError(f"{name} must take reduction= ('sum' or 'mean'): each "
                        "rank sums the loss of its rows and the strategy divides by the units "
                        f"over every rank. For example:\n{EXAMPLE}") from None
