"""One rank of the planner's validation: this machine's profile, or every layout of a run on
this world, each built by the training command's own path, timed, its memory traced, and
predicted by the planner from the profile and the model's compute timed here."""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
import time

import numpy as np

from ... import backend
from ...comm.agree import RankErrors
from ...device_rng import DeviceRandom
from ...parallel.pipeline.partition import layer_times, parameter_counts, partition
from ...peak import peak_bytes
from ...plan.calibrate import calibrate
from ...plan.compute import measured, measured_shard
from ...plan.layouts import layouts
from ...plan.predict import micro_rows, predict
from ...plan.profile import dump, loads
from ...plan.rank import exact, name
from ...train.build import build_trainer
from ...train.cli import load_config
from ...train.memory import estimate, measurable
from ...train.task import build_task
from ..timing import least, slowest, sync
from .standin import build_sleeping, stands_in


def profile(comm, cfg: dict) -> str | None:
    """This machine's profile, calibrated by ``python -m scratchpar.plan calibrate``'s own
    measurement: rank 0's TOML."""
    found, _ = calibrate(comm, cfg["device"], "float32", cfg["quick"])
    return dump(found) if comm.rank == 0 else None


def predicted(comm, cfg: dict) -> list[dict]:
    """Per layout of ``cfg["run"]`` on this world (with ``cfg["standin"]``, those whose compute
    a stand-in can take), rank 0's prediction of its step and peak bytes, and the compute it
    priced them with (``seconds``: [rows, forward, backward]), made in a fresh process, so
    that the compute it times is timed alike for every layout: by every rank at once, as a
    step's ranks compute, or, for a stand-in, by one rank alone, as on a device of its own."""
    cluster = loads(cfg["profile"], "the calibrated profile")
    found = [layout for layout in layouts(cfg["run"], comm.size)
             if not cfg.get("standin") or stands_in(layout.cfg)]
    rows = [{"ranks": comm.size, "layout": name(layout), "flags": list(layout.flags),
             "strategy": layout.cfg.train.strategy, "exact": exact(layout.cfg),
             "standin": bool(cfg.get("standin"))} for layout in found]
    shards = shard_compute(comm, found, cfg)
    asked = {n for layout in found for n in rows_asked(layout, comm.size, cluster)}
    compute = model_compute(comm, found[0].cfg, sorted(asked), cfg,
                            1 if cfg.get("standin") else comm.size)
    if comm.rank == 0:
        shares = stage_shares(found[0].cfg, cfg["repeats"])
        for row, layout in zip(rows, found):
            recorded, priced = recording(compute)
            step = predict(layout.cfg, comm.size, cluster, recorded, shard_of(shards, layout),
                           shares)
            parts = estimate(layout.cfg, comm.size, bound=False)
            row.update(predicted_s=step.step_s, predicted_bytes=measurable(layout.cfg, parts),
                       parts_s={
                           "forward": step.forward_s, "backward": step.backward_s,
                           "update": step.update_s, "exposed": step.exposed_s,
                           "idle": step.idle_s},
                       seconds=[[n, *pair] for n, pair in priced.items()])
    comm.barrier()
    return rows


def runs(comm, cfg: dict) -> list[dict]:
    """For each of ``cfg["flags"]`` (layouts of ``cfg["run"]``), in turn in this process: the
    peak of a short run (the largest rank's, traced; unless ``cfg["traced"]`` is false), then
    the step (the slowest rank's median) of each of ``rounds`` rounds over those layouts, or
    why it did not run. A full validation runs each layout in a process of its own, as the
    training command does; one layout's leftovers slowed the next one's messages here. With
    ``cfg["seconds"]`` (per
    layout, the [rows, forward, backward] its prediction priced), the compute is a stand-in's
    sleep of the largest, pro rata, and the memory, which a stand-in does not allocate, is not
    traced."""
    configs = [load_config([*cfg["run"], *flags], world_size=comm.size) for flags in cfg["flags"]]
    seconds = cfg.get("seconds") or [None] * len(configs)
    builds = [build_trainer if priced is None else
              functools.partial(build_sleeping, **dict(zip(("rows", "forward_s", "backward_s"),
                                                           max(priced))))
              for priced in seconds]
    rows = [{} for _ in configs]
    for row, flags, priced in zip(rows, cfg["flags"], seconds):
        with refusal(row):
            if priced is None and cfg.get("traced", True):
                row["measured_bytes"] = traced(comm, [*cfg["run"], *flags])
    for _ in range(cfg["rounds"]):
        for row, run, build in zip(rows, configs, builds):
            if "not_run" not in row:
                with refusal(row):
                    row.setdefault("rounds_s", []).append(timed(comm, run, cfg, build))
    return rows


@contextlib.contextmanager
def refusal(row: dict):
    """Where the training command refuses the layout, the first line of why, in ``row``."""
    try:
        yield
    except RankErrors as e:
        row["not_run"] = str(e).splitlines()[0]


def timed(comm, cfg, settings: dict, build=build_trainer) -> float:
    """The median over ``repeats`` steps, after ``warmup``, of the slowest rank's seconds, of
    the trainer ``build`` makes."""
    trainer = build(cfg, comm)
    seconds = []
    for k in range(settings["warmup"] + settings["repeats"]):
        batch, _ = trainer.task.batch(k, cfg.train.batch_size)
        sync(comm)
        start = time.perf_counter()
        trainer.strategy.step(batch)
        backend.sync()
        seconds.append(time.perf_counter() - start)
    ended(trainer)
    return float(np.median(slowest(comm, [seconds[settings["warmup"]:]])[0]))


def traced(comm, flags: list[str]) -> int:
    """The largest rank's peak of measured bytes (``scratchpar.peak``: on the CPU arrays and
    Python objects, on a GPU the device's arrays) over the training command's run of ``flags``
    for two steps, from building it to its end (rank 0 gathers the model and evaluates it):
    what the memory estimate predicts for the rank that holds the most
    (``train.memory.measurable``)."""
    with tempfile.TemporaryDirectory(prefix="scratchpar-plan-") as tmp:
        short = ["--steps", "2", "--warmup", "0", "--no-progress",
                 "--metrics", os.path.join(tmp, "metrics.jsonl")]
        cfg = load_config([*flags, *short], world_size=comm.size)
        with peak_bytes() as seen:
            build_trainer(cfg, comm).run()
    return int(max(comm.allgather_obj(seen.bytes, "peak")))


def ended(trainer) -> None:
    """The end of a run, as the training loop ends it: servers' workers leave, replicas
    settle, the strategy frees what it made."""
    trainer.strategy.shutdown()
    trainer.strategy.finish()
    trainer.strategy.close()


def shard_compute(comm, found: list, settings: dict) -> dict:
    """For each tensor-parallel shard among the layouts ``found`` (its tp, whether sequence
    parallel, a micro-batch's rows), the slowest rank's (forward, backward) seconds of it less
    its collectives, timed by every group of tp ranks at once, as a hybrid's ranks compute:
    the least of ``rounds``, the shards taking turns (as :func:`model_compute`)."""
    wanted = sorted({(lay.cfg.train.tp, lay.cfg.train.sequence_parallel,
                      micro_rows(lay.cfg, comm.size)) for lay in found
                     if lay.cfg.train.strategy == "hybrid" and lay.cfg.train.tp > 1})
    if not wanted:
        return {}
    task = build_task(found[0].cfg, DeviceRandom(found[0].cfg.train.seed, 1, 0))
    groups = {tp: comm.split(comm.rank // tp, name="shard timing") for tp, _, _ in wanted}

    def timing(key: tuple) -> tuple[float, float]:
        tp, sp, rows = key
        group, pair = groups[tp], (0.0, 0.0)
        if group.size == tp:  # ranks past the last whole group wait
            pair = measured_shard(task, rows, group, sp, settings["repeats"],
                                  settings["warmup"])
        return slowest_pair(comm, pair, "shard compute")

    best = least(wanted, timing, settings["rounds"])
    for group in groups.values():
        group.free()
    return best


def slowest_pair(comm, pair: tuple[float, float], what: str) -> tuple[float, float]:
    """Every rank's (forward, backward) seconds, the slowest of each: a step waits for it."""
    pairs = comm.allgather_obj(pair, what)
    return max(f for f, _ in pairs), max(b for _, b in pairs)


def stage_shares(cfg, repeats: int):
    """``shares(rows, P)``: each of P virtual stages' share of the model's compute on a
    micro-batch of ``rows``, the sum of its layers' forward and backward timed here
    (``partition.layer_times``), the stages cut as the engine cuts them (``--balance``: by
    parameter count, or by those times)."""
    task = build_task(cfg, DeviceRandom(cfg.train.seed, 1, 0))
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


def shard_of(shards: dict, layout):
    """``layout``'s tp shard's compute by rows, from :func:`shard_compute`'s timings."""
    t = layout.cfg.train
    return lambda rows: shards[(t.tp, t.sequence_parallel, rows)]


def recording(compute):
    """``compute``, and the dict of each rows count it was asked for and what it gave."""
    priced: dict[int, tuple[float, float]] = {}

    def recorded(rows: int) -> tuple[float, float]:
        priced[rows] = compute(rows)
        return priced[rows]

    return recorded, priced


def rows_asked(layout, world: int, cluster) -> set[int]:
    """The row counts whose compute the prediction of ``layout`` asks for."""
    recorded, priced = recording(lambda rows: (1.0, 1.0))
    predict(layout.cfg, world, cluster, recorded, lambda rows: (1.0, 1.0))
    return set(priced)


def model_compute(comm, cfg, rows: list[int], settings: dict, computing: int):
    """``compute(rows)``: (forward, backward) seconds of the whole model on each of ``rows``
    (every layout of a run shares the model), timed by the first ``computing`` ranks at once
    (the others wait), the slowest's: ranks computing together share the node's memory and
    caches. The least of ``rounds`` medians (:func:`least`)."""
    task = build_task(cfg, DeviceRandom(cfg.train.seed, 1, 0))

    def timing(n: int) -> tuple[float, float]:
        pair = measured(task, n, settings["repeats"], settings["warmup"]) \
            if comm.rank < computing else (0.0, 0.0)
        return slowest_pair(comm, pair, "model compute")

    return least(rows, timing, settings["rounds"]).__getitem__
