"""Interleaved timing: contenders take turns, so a noisy machine slows them all alike.

The contract: every contender is a :class:`Timed`, its work and the wait that ends it, and the
clock is read only after the wait. A GPU runs kernels asynchronously: without the wait, what is
timed is the launch of the work, not the work (CuPy's stream sync, ``torch.cuda.synchronize``).
"""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field


def on_host() -> None:
    """The wait of work done on the host: none, it is finished when it returns."""


@dataclass
class Timed:
    """One contender's work, and the wait for it to be finished (``on_host`` on the CPU)."""

    run: Callable[[], object]
    sync: Callable[[], None]

    def __call__(self):
        """Run the work and wait for it; returns what the work returned."""
        out = self.run()
        self.sync()
        return out


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


def interleaved(contenders: dict[str, Timed], repeats: int, warmup: int) -> dict[str, Samples]:
    """Time each ``name → Timed`` ``repeats`` times, round-robin with a rotating first turn; a
    sample runs from the start of the work to the end of its wait."""
    items = list(contenders.items())
    for _ in range(warmup):
        for _, timed in items:
            timed()
    samples = {name: Samples() for name, _ in items}
    for r in range(repeats):
        k = r % len(items)
        for name, timed in items[k:] + items[:k]:
            faults, start = _minor_faults(), time.perf_counter()
            timed()
            samples[name].seconds.append(time.perf_counter() - start)
            samples[name].faults.append(_minor_faults() - faults)
    return samples


def batched(fn, calls: int):
    """``fn`` called ``calls`` times in a row: one timed turn for tiny operations."""

    def run():
        for _ in range(calls):
            fn()

    return run
