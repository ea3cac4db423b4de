"""The linear scaling rule, measured: at a fixed number of examples (epochs, on a finite set),
the held-out loss against the batch with the rate scaled as the batch (Goyal et al. 2017, §2.1:
batch ×k ⇒ rate ×k, after a gradual warm-up, §2.2) and with the rate held at the base batch's.

Each run is the training command's own on one device: SGD with momentum 0.9 (the rule's
setting), a linear warm-up over the first tenth of its steps, then a constant rate, for
``examples``/B steps, scored on held-out batches at the end. Below the critical batch the
scaled rate keeps the loss of the base batch; beyond it no rate can, since fewer steps remain
than the loss needs (McCandlish et al. 2018, §2.3).
"""

from __future__ import annotations

from ..optim.schedule import linear_scaling
from .steps import one_device


def final_loss(flags: list[str], batch: int, lr: float, steps: int) -> float:
    """The held-out loss after ``steps`` steps of ``batch`` rows at ``lr``."""
    summary, _ = one_device([
        *flags, "--optimizer", "sgd", "--momentum", "0.9", "--batch-size", str(batch),
        "--lr", repr(lr), "--schedule", "constant",
        "--warmup", str(max(steps // 10, 1) if steps > 1 else 0), "--steps", str(steps),
        "--log-every", str(steps), "--eval-batches", "4"])
    return summary["eval_loss"]


def sweep(flags: list[str], batches: list[int], base_lr: float, examples: int) -> list[dict]:
    """Per batch (the first is the base), the steps that ``examples`` rows take, the scaled
    rate, and the held-out loss with it and with the base rate."""
    rows = []
    for batch in batches:
        steps = max(examples // batch, 1)
        scaled = linear_scaling(base_lr, batches[0], batch)
        rows.append({"batch": batch, "steps": steps, "scaled_lr": scaled,
                     "scaled": final_loss(flags, batch, scaled, steps),
                     "fixed": final_loss(flags, batch, base_lr, steps)})
    return rows
