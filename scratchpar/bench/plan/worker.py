"""One rank of the planner's validation: each layout of a run on this world built by the training
command's own path, timed, its memory traced, and predicted by the planner from the calibrated
profile and the model's compute timed here (``plan/measured.py``)."""

from __future__ import annotations

import functools

import numpy as np

from ...plan.layouts import layouts
from ...plan.measured import model_compute, shard_compute, stage_shares
from ...plan.predict import predict
from ...plan.profile import loads
from ...plan.rank import exact, name
from ...plan.timing import steps
from ...plan.traced import refusal, traced
from ...train.build import build_trainer
from ...train.cli import load_config
from ...train.memory import estimate, measurable
from ..standin import build_sleeping, stands_in
from ..timing import slowest, sync


def predicted(comm, cfg: dict) -> list[dict]:
    """Per layout of ``cfg["run"]`` on this world (with ``cfg["standin"]``, those a stand-in can
    take), rank 0's prediction of its step and peak bytes, and the compute it priced them with
    (``seconds``: [rows, forward, backward]), timed alike for every layout in a fresh process:
    by every rank at once, as a step's ranks compute, or for a stand-in by one rank alone."""
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
                       parts_s={"forward": step.forward_s, "backward": step.backward_s,
                                "update": step.update_s, "exposed": step.exposed_s,
                                "idle": step.idle_s},
                       seconds=[[n, *pair] for n, pair in priced.items()])
    comm.barrier()
    return rows


def runs(comm, cfg: dict) -> list[dict]:
    """For each of ``cfg["flags"]`` (layouts of ``cfg["run"]``), in turn in this process: the
    largest rank's traced peak of a short run (unless ``cfg["traced"]`` is false), then the
    step (the slowest rank's median) of each of ``rounds`` rounds, or why it did not run. With
    ``cfg["seconds"]`` (per layout, the [rows, forward, backward] its prediction priced), the
    compute is a stand-in's sleep of the largest, pro rata, and nothing is traced."""
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


def timed(comm, cfg, settings: dict, build=build_trainer) -> float:
    """The median of the slowest rank's seconds over ``repeats`` steps after ``warmup`` of the
    trainer ``build`` makes, each step from a barrier."""
    trainer = build(cfg, comm)
    seconds = steps(trainer, cfg.train.batch_size, settings["repeats"], settings["warmup"],
                    start=lambda: sync(comm))
    ended(trainer)
    return float(np.median(slowest(comm, [seconds])[0]))


def ended(trainer) -> None:
    """The end of a run, as the training loop ends it: servers' workers leave, replicas
    settle, the strategy frees what it made."""
    trainer.strategy.shutdown()
    trainer.strategy.finish()
    trainer.strategy.close()


def shard_of(shards: dict, layout):
    """``layout``'s tp shard's compute by rows, from ``plan.measured.shard_compute``'s."""
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
