"""Contenders timed in turns, in one process or across ranks: a noisy machine slows all alike."""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .. import backend

IDLE_POLL_S = 2e-4  # how often a rank sleeping through a one-device baseline looks for its cue


def on_host() -> None:
    """The wait of work done on the host: none, it is finished when it returns."""


@dataclass
class Timed:
    """One contender's work, and the wait that ends it: a GPU runs kernels asynchronously, so
    the clock is read after the wait (CuPy's stream sync, ``torch.cuda.synchronize``)."""

    run: Callable[[], object]
    sync: Callable[[], None]

    def __call__(self):
        out = self.run()
        self.sync()
        return out


def fresh(model, x, backward) -> Timed:
    """``backward()`` from cleared gradients of ``model`` and of its input ``x``: the input
    needs its gradient, as inside a network, so a split model's backward collectives run."""
    leaves = [*model.parameters(), x]

    def run():
        for leaf in leaves:
            leaf.grad = None
        backward()

    return Timed(run, backend.sync)


class Alone(Timed):
    """A one-device baseline among ranks: rank 0's work, which the others sleep through."""


@dataclass
class Samples:
    """One contender's timed turns: the seconds and the minor page faults of each."""

    seconds: list[float] = field(default_factory=list)
    faults: list[int] = field(default_factory=list)

    def median_ms(self) -> float:
        return 1e3 * statistics.median(self.seconds)

    def median_faults(self) -> float:
        return statistics.median(self.faults)


def interleaved(contenders: dict[str, Timed], repeats: int, warmup: int,
                start=lambda: None) -> dict[str, Samples]:
    """Each contender timed ``repeats`` times after ``warmup`` untimed rounds, round-robin with
    a rotating first turn; ``start()`` runs untimed before every turn."""
    items = list(contenders.items())
    for _ in range(warmup):
        for _, timed in items:
            start()
            timed()
    samples = {name: Samples() for name, _ in items}
    for r in range(repeats):
        k = r % len(items)
        for name, timed in items[k:] + items[:k]:
            start()
            faults, begin = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
            timed()
            samples[name].seconds.append(time.perf_counter() - begin)
            samples[name].faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults)
    return samples


def sync(comm) -> None:
    """The polled barrier brings every rank close; a tiny blocking MPI all-reduce then releases
    them within about one message latency of each other."""
    comm.barrier()
    one = np.zeros(1)
    comm.mpi_allreduce(one.copy(), one, "max", blocking=True)


def slowest(comm, seconds) -> np.ndarray:
    """Element-wise max over ranks of this rank's timings."""
    mine = np.asarray(seconds, dtype=np.float64)
    out = np.empty_like(mine)
    comm.mpi_allreduce(mine, out, "max", blocking=True)
    return out


def alone(step: Timed, comm) -> Alone:
    """Rank 0 runs ``step`` by itself, one core busy as on one device, while the other ranks
    sleep until its message wakes them (a spinning wait would load their cores)."""
    flag = np.zeros(1)

    def run():
        if comm.rank == 0:
            step()
            for r in range(1, comm.size):
                comm.send(flag, r)
        else:
            request = comm.irecv(flag, 0)
            while not comm.test_all([request]):
                time.sleep(IDLE_POLL_S)

    return Alone(run, on_host)


def turns(comm, contenders: dict[str, Timed], repeats: int, warmup: int) -> dict:
    """Median and samples of the slowest rank's seconds per step of each contender, taking turns
    from a barrier; an :class:`Alone` baseline counts rank 0's time."""
    samples = interleaved(contenders, repeats, warmup, start=lambda: sync(comm))
    mine = [[0.0] * repeats if isinstance(contenders[name], Alone) and comm.rank else s.seconds
            for name, s in samples.items()]
    worst = slowest(comm, mine)  # (C, R)
    return {name: {"median_s": float(np.median(worst[i])), "samples_s": worst[i].tolist()}
            for i, name in enumerate(samples)}
