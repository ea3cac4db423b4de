"""Contenders timed in turns, in one process or across ranks, by the engine's one timing loop
(scratchpar/timing.py): a noisy machine slows all alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import backend, timing
from ..autograd import Tensor

IDLE_POLL_S = 2e-4  # how often a rank sleeping through a one-device baseline looks for its cue


def on_host() -> None:
    """The wait of work done on the host: none, it is finished when it returns."""


@dataclass
class Timed:
    """One contender's work, and the wait that ends it: a GPU runs kernels asynchronously, so
    the clock is read after the wait (CuPy's stream sync by default, ``torch.cuda.synchronize``)."""

    run: Callable[[], object]
    sync: Callable[[], None] = backend.sync

    def __call__(self):
        out = self.run()
        self.sync()
        return out


class Alone(Timed):
    """A one-device baseline among ranks: rank 0's work, which the others sleep through."""


def stepping(strategy, batch) -> Timed:
    """A strategy's step on ``batch``."""
    return Timed(lambda: strategy.step(batch))


def fresh(model, x, backward) -> Timed:
    """``backward()`` from cleared gradients of ``model`` and of its input ``x``: the input
    needs its gradient, as inside a network, so a split model's backward collectives run."""
    leaves = [*model.parameters(), x]

    def run():
        for leaf in leaves:
            leaf.grad = None
        backward()

    return Timed(run)


def accumulated(model, optimizer, loss_fn, parts: list, units: int) -> Timed:
    """One device's step on the ``parts`` of a batch of ``units`` units: each part's summed
    loss backward, the gradients scaled by 1/units, one update. A data-parallel rank's share or
    a pipeline's micro-batches, without their messages."""
    params = model.parameters()

    def step():
        optimizer.zero_grad()
        for part in parts:
            loss = loss_fn(model, part, reduction="sum")
            loss.backward()
        loss.item()  # the host reads the loss, as a strategy's step does
        for p in params:
            p.grad *= 1.0 / units
        optimizer.step()

    return Timed(step)


def interleaved(contenders: dict[str, Timed], repeats: int, warmup: int,
                start=lambda: None) -> dict[str, list[float]]:
    """Each contender's seconds in ``repeats`` turns after ``warmup`` untimed rounds, round-robin
    with a rotating first turn; ``start()`` runs untimed before every turn."""
    found = timing.turns({name: timing.clocked(timed.run, timed.sync)
                          for name, timed in contenders.items()}, repeats, warmup, start)
    return {name: [seconds for seconds, in samples] for name, samples in found.items()}


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


def turns(comm, contenders: dict[str, Timed], cfg: dict) -> dict:
    """Median and samples of the slowest rank's seconds per step of each contender, taking turns
    with every rank starting each together (``timing.sync``), ``cfg["repeats"]`` after
    ``cfg["warmup"]``; an :class:`Alone` baseline counts rank 0's time."""
    samples = interleaved(contenders, cfg["repeats"], cfg["warmup"],
                          start=lambda: timing.sync(comm))
    worst = timing.slowest(comm, [[0.0] * cfg["repeats"] if isinstance(contenders[name], Alone)
                                  and comm.rank else s for name, s in samples.items()])  # (C, R)
    return {name: {"median_s": float(np.median(worst[i])), "samples_s": worst[i].tolist()}
            for i, name in enumerate(samples)}


def against_one_device(comm, one, split, x_host, backward, cfg: dict) -> tuple[dict, list]:
    """``backward(model, x)`` of the single-device ``one`` on rank 0 alone and of its ``split``
    over every rank, in turns, each on its own copy of the host input as a leaf that needs its
    gradient: the timings ("alone", "split") and the two inputs."""
    xs = [Tensor(backend.to_device(x_host), requires_grad=True) for _ in range(2)]
    one_step, split_step = (fresh(m, x, lambda m=m, x=x: backward(m, x))
                            for m, x in zip((one, split), xs))
    return turns(comm, {"alone": alone(one_step, comm), "split": split_step}, cfg), xs


def speedup(timed: dict, name: str) -> dict:
    """The medians (ms) of :func:`against_one_device`, the split's as ``name``'s, and the
    speed-up."""
    one, split = timed["alone"]["median_s"], timed["split"]["median_s"]
    return {"alone_ms": 1e3 * one, f"{name}_ms": 1e3 * split, "speedup": one / split}
