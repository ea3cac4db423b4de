"""Interleaved timing: contenders take turns, so a noisy machine slows them all alike."""

from __future__ import annotations

import resource
import statistics
import time
from dataclasses import dataclass, field


@dataclass
class Samples:
    """One contender's timed calls: seconds and minor page faults of each."""

    seconds: list[float] = field(default_factory=list)
    faults: list[int] = field(default_factory=list)

    def median_ms(self) -> float:
        return 1e3 * statistics.median(self.seconds)

    def median_faults(self) -> float:
        return statistics.median(self.faults)


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def interleaved(contenders: dict, repeats: int, warmup: int) -> dict[str, Samples]:
    """Time each ``name → fn()`` ``repeats`` times, round-robin with a rotating first turn."""
    items = list(contenders.items())
    for _ in range(warmup):
        for _, fn in items:
            fn()
    samples = {name: Samples() for name, _ in items}
    for r in range(repeats):
        k = r % len(items)
        for name, fn in items[k:] + items[:k]:
            faults, start = _minor_faults(), time.perf_counter()
            fn()
            samples[name].seconds.append(time.perf_counter() - start)
            samples[name].faults.append(_minor_faults() - faults)
    return samples


def batched(fn, calls: int):
    """``fn`` called ``calls`` times in a row: one timed turn for tiny operations."""

    def run():
        for _ in range(calls):
            fn()

    return run
