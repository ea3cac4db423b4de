"""Timing on this machine, the one loop every measurement runs: contenders take turns, each
call's seconds are kept after ``warmup`` untimed calls, and a figure is their median, or the
least of a few rounds of medians; among ranks, each call starts from every rank together and
a figure is the slowest rank's.

Taking turns, a noisy machine slows every contender alike; the first call maps memory and
fills caches, so it is not timed; and a GPU runs kernels asynchronously, so the clock is read
after the device's queue is waited for.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Hashable

import numpy as np

from . import backend

Run = Callable[[], tuple[float, ...]]  # one call, and the seconds of each of its phases


def clock(wait: Callable[[], None] = backend.sync) -> float:
    """The time after ``wait()``, by default the device's queued work done."""
    wait()
    return time.perf_counter()


def clocked(run: Callable[[], object], wait: Callable[[], None] = backend.sync) -> Run:
    """``run`` made to return its seconds, one phase: from its start to the end of ``wait()``
    after it (CuPy's stream by default, ``torch.cuda.synchronize``, or nothing on the host)."""

    def seconds() -> tuple[float]:
        begin = time.perf_counter()
        run()
        return (clock(wait) - begin,)

    return seconds


def turns(contenders: dict[Hashable, Run], repeats: int, warmup: int = 1,
          start: Callable[[], None] = lambda: None) -> dict[Hashable, list[tuple[float, ...]]]:
    """Each contender's seconds per call in ``repeats`` rounds after ``warmup`` untimed ones,
    round-robin with a rotating first turn; ``start()`` runs untimed before every call."""
    items = list(contenders.items())
    for _ in range(warmup):
        for _, run in items:
            start()
            run()
    samples = {name: [] for name, _ in items}
    for r in range(repeats):
        k = r % len(items)
        for name, run in items[k:] + items[:k]:
            start()
            samples[name].append(run())
    return samples


def medians(run: Run, repeats: int, warmup: int = 1,
            start: Callable[[], None] = lambda: None) -> tuple[float, ...]:
    """The median of each phase's seconds over ``repeats`` calls of ``run`` after ``warmup``
    (:func:`turns` with one contender)."""
    samples = turns({"run": run}, repeats, warmup, start)["run"]
    return tuple(statistics.median(phase) for phase in zip(*samples))


def steps(trainer, rows: int, repeats: int, warmup: int,
          start: Callable[[], None] = lambda: None) -> list[float]:
    """The seconds of ``trainer``'s steps on its batches ``warmup`` … ``warmup + repeats − 1``
    of ``rows`` rows, after its steps on the batches before them; each batch is drawn and
    copied to the device untimed, then ``start()`` runs (a barrier among ranks)."""
    batches = (trainer.task.batch(k, rows)[0] for k in itertools.count())
    batch = None

    def draw():
        nonlocal batch
        batch = next(batches)
        backend.sync()
        start()

    step = clocked(lambda: trainer.strategy.step(batch))
    return [seconds for seconds, in turns({"step": step}, repeats, warmup, draw)["step"]]


def least(keys: list, timing: Callable[[Hashable], tuple[float, ...]], rounds: int) -> dict:
    """For each of ``keys``, the least (by its sum) of ``rounds`` of ``timing(key)``, a tuple
    of seconds, the keys taking turns in each round: a burst of another load on the machine
    then spoils one round, not a figure."""
    best: dict = {}
    for _ in range(rounds):
        for key in keys:
            found = timing(key)
            best[key] = min(best.get(key, found), found, key=sum)
    return best


def slowest(comm, seconds) -> np.ndarray:
    """The element-wise max over ranks of this rank's ``seconds`` (any shape), the same on every
    rank: a step waits for its slowest rank. A polled barrier gathers the ranks first, so one
    that waits while others compute naps rather than spinning on their cores; the blocking MPI
    all-reduce then releases them within about one message latency of each other."""
    comm.barrier()
    mine = np.asarray(seconds, dtype=np.float64)
    out = np.empty_like(mine)
    comm.mpi_allreduce(mine, out, "max", blocking=True)
    return out


def sync(comm) -> None:
    """Every rank starts the next call together, within about one message latency of each
    other: :func:`slowest` of nothing, for its barrier and release."""
    slowest(comm, np.zeros(1))
