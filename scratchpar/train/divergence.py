"""Divergence: steps skipped for a non-finite loss or gradient are counted, and too many in a row
end the run with a message that says what to change."""

from __future__ import annotations

import math


class Diverged(RuntimeError):
    """Training diverged. Every rank raises it at the same step: the strategies judge the
    reduced loss and gradient, which every rank holds alike. Not so where ``alone`` is set: there
    the strategy's ranks do not step together (a parameter server's worker judges its own loss)."""

    alone = False


class BadSteps:
    """Counts the skipped steps (the strategy's ``metrics["skipped"]``) and those in a row. A
    loss scale's overflow (``metrics["overflow"]``: the scale was halved, Micikevicius et al.
    2018, §3.2) is skipped too, but counted apart: it says nothing of divergence. A step this
    rank sat out (``metrics["idle"]``: a round-robin worker waiting for its turn, repeating
    its last metrics) neither counts nor breaks a run."""

    def __init__(self, limit: int):
        self.limit, self.in_a_row, self.total, self.overflows = limit, 0, 0, 0
        self.applied = None  # (step, loss) of the last step applied

    def count(self, step: int, metrics: dict, lr: float) -> dict | None:
        """Take step ``step``'s verdict; the metrics record of a skipped step, else ``None``."""
        if metrics.get("idle"):
            return None
        if not metrics.get("skipped"):
            self.in_a_row = 0
            self.applied = step, metrics["loss"]
            return None
        record = {"event": "skip", "step": step, "loss": finite_or_text(metrics["loss"]),
                  "grad_norm": finite_or_text(metrics.get("grad_norm")), "lr": lr}
        if metrics.get("overflow"):
            self.overflows += 1
            return {**record, "event": "overflow"}
        self.in_a_row += 1
        self.total += 1
        return {**record, "in_a_row": self.in_a_row}

    @property
    def exhausted(self) -> bool:
        return self.in_a_row >= self.limit

    def error(self, cfg, skip: dict) -> Diverged:
        """The error after :attr:`exhausted`, from the last skip record: where the run
        stopped, the loss it came from (the last step applied) and went to, and the knobs.
        Losses are said to 4 digits: past the point of divergence, the digits after those
        depend on the rounding of the machine's BLAS kernel."""
        o, last = cfg.optim, skip["step"]
        first = last - self.in_a_row + 1
        steps = f"step {last} (" if first == last else \
            f"steps {first}-{last} ({self.in_a_row} in a row, "
        then = f"gradient norm {_short(skip['grad_norm'])}, learning rate {skip['lr']:.3g}"
        if self.applied is None:
            went = f"No step was applied: step {last} had loss {_short(skip['loss'])} ({then})."
        else:
            went = (f"The loss went from {_short(self.applied[1])} at step {self.applied[0]}, "
                    f"the last step applied, to {_short(skip['loss'])} at step {last} ({then}).")
        return Diverged(
            f"training diverged: {steps}--max-bad-steps {self.limit}) had a non-finite loss "
            f"or gradient, and each was skipped. {went} Lower --lr (now {o.lr:g}), lengthen "
            f"--warmup (now {o.warmup}), or clip gradients with --grad-clip (now "
            f"{o.grad_clip:g}; 0 is off).")


def held_out_diverged(cfg, summary: dict) -> Diverged:
    """The error when the held-out loss at the end of a run is not finite."""
    return Diverged(f"training diverged: the held-out loss is {summary['eval_loss']} after step "
                    f"{summary['step']} ({summary['skipped_steps']} steps skipped for a "
                    f"non-finite loss or gradient). Lower --lr (now {cfg.optim.lr:g}) or "
                    "lengthen --warmup.")


def finite_or_text(value):
    """``value``, or its text ("nan", "inf") where strict JSON has no number for it."""
    return str(value) if isinstance(value, float) and not math.isfinite(value) else value


def _short(value) -> str:
    """A loss or norm to 4 significant digits, or its text where it is not finite."""
    return value if isinstance(value, str) else f"{value:.4g}"
