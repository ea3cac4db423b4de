"""The steps between two metrics records: their loss, units, skips and time."""

from __future__ import annotations

import time

from .divergence import finite_or_text


class Window:
    """Accumulates the steps since the last record: the unit-weighted loss of the steps
    applied (a skipped step's loss is not a loss of the model), every step's units (for the
    throughput), and the skips."""

    def __init__(self, unit: str, world: int):
        self.rate, self.world = f"{unit}_per_s", world
        self._reset(time.perf_counter())

    def _reset(self, now: float) -> None:
        self.loss = self.units = self.all_units = self.skips = 0.0
        self.start = now

    def add(self, metrics: dict, units: int, skipped: bool) -> None:
        self.all_units += units
        if skipped:
            self.skips += 1
        else:
            self.loss += metrics["loss"] * units
            self.units += units

    def record(self, step: int, lr: float, metrics: dict, now: float) -> dict:
        """The record of the window ending now (``None`` loss if every step was skipped),
        with the last step's other metrics; the window starts again."""
        seconds = now - self.start
        extra = {k: finite_or_text(v) for k, v in metrics.items() if k not in ("loss", "skipped")}
        record = {"event": "step", "step": step,
                  "loss": self.loss / self.units if self.units else None,
                  "skipped": int(self.skips), "lr": lr, self.rate: self.all_units / seconds,
                  f"{self.rate}_per_rank": self.all_units / seconds / self.world, **extra}
        self._reset(now)
        return record
