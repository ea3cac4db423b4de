"""The compute a prediction prices, timed on this world (``predict``'s ``compute``, ``tensor``
and ``shares``): the whole model's and a tensor-parallel shard's (forward, backward) seconds
by rows, the slowest rank's and the least of rounds, and each pipeline stage's share.

``settings`` holds the timing's ``repeats``, ``warmup`` and ``rounds``: each figure is a
median of ``repeats`` after ``warmup`` (``compute.measured``), the least of ``rounds`` rounds
taken in turns over the row counts (``timing.least``).
"""

from __future__ import annotations

import functools

from ..device_rng import DeviceRandom
from ..parallel.pipeline.partition import layer_times, parameter_counts, partition
from ..timing import least, slowest
from ..train.task import build_task
from .compute import measured, measured_shard
from .predict import micro_rows


def task_of(cfg):
    """The run's task on one rank: its model, at its seed, and its data."""
    return build_task(cfg, DeviceRandom(cfg.train.seed, 1, 0))


def model_compute(comm, cfg, rows: list[int], settings: dict, computing: int):
    """``compute(rows)``: (forward, backward) seconds of the whole model on each of ``rows``
    (every layout of a run shares the model), timed by the first ``computing`` ranks at once
    (the others wait), the slowest's: ranks computing together share the node's memory and
    caches."""
    task = task_of(cfg)

    def timing(n: int) -> tuple[float, float]:
        pair = measured(task, n, settings["repeats"], settings["warmup"]) \
            if comm.rank < computing else (0.0, 0.0)
        return tuple(slowest(comm, pair).tolist())

    return least(rows, timing, settings["rounds"]).__getitem__


def shard_compute(comm, found: list, settings: dict) -> dict:
    """For each tensor-parallel shard among the layouts ``found`` (its tp, whether sequence
    parallel, a micro-batch's rows), the slowest rank's (forward, backward) seconds of it less
    its collectives, timed by every group of tp ranks at once, as a hybrid's ranks compute,
    the shards taking turns."""
    wanted = sorted({(lay.cfg.train.tp, lay.cfg.train.sequence_parallel,
                      micro_rows(lay.cfg, comm.size)) for lay in found
                     if lay.cfg.train.strategy == "hybrid" and lay.cfg.train.tp > 1})
    if not wanted:
        return {}
    task = task_of(found[0].cfg)
    groups = {tp: comm.split(comm.rank // tp, name="shard timing") for tp, _, _ in wanted}

    def timing(key: tuple) -> tuple[float, float]:
        tp, sp, rows = key
        group, pair = groups[tp], (0.0, 0.0)
        if group.size == tp:  # ranks past the last whole group wait
            pair = measured_shard(task, rows, group, sp, settings["repeats"],
                                  settings["warmup"])
        return tuple(slowest(comm, pair).tolist())

    best = least(wanted, timing, settings["rounds"])
    for group in groups.values():
        group.free()
    return best


def stage_shares(cfg, repeats: int):
    """``shares(rows, P)``: each of P virtual stages' share of the model's compute on a
    micro-batch of ``rows``, the sum of its layers' forward and backward timed here
    (``partition.layer_times``), the stages cut as the engine cuts them (``--balance``: by
    parameter count, or by those times)."""
    task = task_of(cfg)
    layers = task.model.pipeline_layers()

    @functools.cache
    def times(rows: int) -> list[float]:
        return layer_times(layers, task.split(task.batch(0, rows)[0])[0], repeats)

    def shares(rows: int, stages: int) -> list[tuple[float, float]]:
        seconds = times(rows)
        weights = seconds if cfg.train.balance == "time" else parameter_counts(layers)
        return [(sum(seconds[i] for i in cut) / sum(seconds),) * 2
                for cut in partition(weights, stages)]

    return shares
