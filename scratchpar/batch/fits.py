"""The largest batch that fits a memory budget, predicted from the training command's own
memory estimate (``train/memory.py``): the batch at which the command would still start.

A rank under a budget of M bytes has, on the CPU (an address-space limit), M less what a
process maps before its arrays, as the command reckons it; on a GPU, M of device memory for
the parts of the estimate that live there (``train/memory.on_device``). The estimate
grows with the batch (activations, the batches drawn) and never shrinks, so the largest batch is
found by doubling, then bisecting, over the batches the command accepts: multiples of the least
one (a rank a row; a pipeline's micro-batches). The strategy shifts it: ZeRO and offload free
model states for activations, a pipeline stage and a tensor-parallel shard hold a share.
"""

from __future__ import annotations

import functools

from ..train.cli import load_config
from ..train.memory import PROCESS_BYTES, needed
from ..train.option import ConfigError

LARGEST = 1 << 30  # rows: no budget here reaches it


def config(flags: list[str], world: int, batch: int):
    return load_config([*flags, "--batch-size", str(batch)], world_size=world)


def need(flags: list[str], world: int, batch: int) -> int:
    """Bytes a rank needs for the run of ``flags`` at ``batch`` rows on ``world`` ranks, by
    the training command's estimate (the bound it refuses a run by): on a GPU, of the
    device's memory."""
    return needed(config(flags, world, batch), world)


def least_batch(flags: list[str], world: int, search: int = 4096) -> int:
    """The smallest batch the training command accepts for ``flags`` on ``world`` ranks;
    the command's refusal of the largest tried where none is (the flags themselves)."""
    for batch in range(1, search + 1):
        try:
            config(flags, world, batch)
        except ConfigError as refused:
            why = refused
            continue
        return batch
    raise why


def largest(flags: list[str], world: int, budget: int) -> dict:
    """The largest batch whose estimate fits ``budget`` bytes a rank (``batch`` None where not
    even the least does), with the bytes it needs and those the next batch up would."""
    step = least_batch(flags, world)
    gpu = config(flags, world, step).train.device == "cuda"
    have = budget if gpu else budget - PROCESS_BYTES
    found = {"step": step, "have": have}
    at = functools.cache(lambda k: need(flags, world, k * step))  # bytes at k·step rows
    if at(1) > have:
        return {**found, "batch": None, "need": at(1)}
    low, high = 1, 2  # multiples of step: low fits; find a high that does not
    while high * step <= LARGEST and at(high) <= have:
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if at(middle) <= have else (low, middle)
    return {**found, "batch": low * step, "need": at(low),
            "next": at(high) if high * step <= LARGEST else None}
