"""A step's compute in seconds: from FLOP at a device's rate, for a machine that is not here,
or measured on this one, for the model at hand.

- :func:`roofline`: rows · W / F forward and backward (plan/flops.py's W), the compute-bound
  side of the roofline (Williams, Waterman & Patterson 2009): right where large products
  dominate, short where elementwise ops and the framework's cost per op weigh;
- :func:`measured`: the model's own forward and backward on ``rows`` rows of its data, timed
  on this device (medians after a warm-up), everything included.
"""

from __future__ import annotations

import statistics
import time

from ..backend import sync
from .flops import Work


def roofline(work: Work, rows: int, profile) -> tuple[float, float]:
    """(forward, backward) seconds of ``rows`` rows at the profile's FLOP/s."""
    return rows * work.forward / profile.device.flops, rows * work.backward / profile.device.flops


def measured(task, rows: int, repeats: int = 5, warmup: int = 1) -> tuple[float, float]:
    """(forward, backward) seconds of ``task``'s model on ``rows`` rows of its own data: the
    summed loss, as a data-parallel rank computes it, then its backward; medians of
    ``repeats`` after ``warmup`` (a fresh process maps its memory in the first few)."""
    batch, _ = task.batch(0, rows)
    model, samples = task.model, []
    for _ in range(warmup + repeats):
        model.zero_grad()
        sync()
        start = time.perf_counter()
        loss = task.loss(model, batch, reduction="sum")
        sync()
        middle = time.perf_counter()
        loss.backward()
        sync()
        samples.append((middle - start, time.perf_counter() - middle))
    forward, backward = zip(*samples[warmup:])
    return statistics.median(forward), statistics.median(backward)
