"""One rank of the planner's validation: each layout of a run predicted, or run and timed."""

from __future__ import annotations

import numpy as np

from ...plan.layouts import layouts
from ...plan.measured import model_compute, shard_compute, stage_shares
from ...plan.predict import from_profile, predict
from ...plan.profile import loads
from ...plan.rank import name
from ...plan.traced import refusal, traced
from ...timing import slowest, steps, sync
from ...train.build import build_trainer
from ...train.cli import load_config
from ...train.memory import estimate, measurable
from ..standin import build_sleeping, stands_in


def predicted(comm, cfg: dict) -> list[dict]:
    """Per layout of ``cfg["run"]`` on this world (with ``cfg["standin"]``, those a stand-in can
    take), rank 0's prediction of its step and peak bytes, with the compute it priced (``seconds``:
    [rows, forward, backward]), timed here by every rank at once, or by one for a stand-in."""
    cluster, standin = loads(cfg["profile"], "the calibrated profile"), cfg["standin"]
    found = [layout for layout in layouts(cfg["run"], comm.size)
             if not standin or stands_in(layout.cfg)]
    rows = [{"ranks": comm.size, "layout": name(layout), "flags": list(layout.flags),
             "strategy": layout.cfg.train.strategy, "standin": standin} for layout in found]
    shards = shard_compute(comm, found, cfg)
    asked = {n for layout in found
             for n in priced(layout, comm.size, cluster, lambda rows: (1.0, 1.0), shards)[1]}
    compute = model_compute(comm, found[0].cfg, sorted(asked), cfg, 1 if standin else comm.size)
    if comm.rank == 0:
        shares = stage_shares(found[0].cfg, cfg["repeats"])
        for row, layout in zip(rows, found):
            step, seconds = priced(layout, comm.size, cluster, compute, shards, shares)
            parts = estimate(layout.cfg, comm.size, bound=False)
            row.update(predicted_s=step.step_s, predicted_bytes=measurable(layout.cfg, parts),
                       seconds=[[n, *pair] for n, pair in seconds.items()],
                       profile_s=from_profile(layout.cfg, comm.size, cluster).step_s)
    comm.barrier()
    return rows


def priced(layout, world: int, cluster, compute, shards: dict, shares=None) -> tuple:
    """``layout``'s step predicted on ``world`` ranks from the model's ``compute`` (and its tp
    shard's, ``shard_compute``'s ``shards``), and each rows count it priced → (forward,
    backward) seconds."""
    t, asked = layout.cfg.train, {}

    def recorded(rows: int) -> tuple[float, float]:
        asked[rows] = compute(rows)
        return asked[rows]

    return predict(layout.cfg, world, cluster, recorded,
                   lambda rows: shards[(t.tp, t.sequence_parallel, rows)], shares), asked


def runs(comm, cfg: dict) -> list[dict]:
    """For each of ``cfg["flags"]`` in this process: the largest rank's traced peak of a short
    run (where ``cfg["traced"]`` and no ``cfg["seconds"]`` priced a stand-in), then in turn each
    one's step as a round of ``rounds_s`` (:func:`timed`), or why it did not run."""
    seconds = cfg["seconds"] or [None] * len(cfg["flags"])
    rows = [{} for _ in seconds]
    for row, flags, priced_with in zip(rows, cfg["flags"], seconds):
        with refusal(row):
            if priced_with is None and cfg["traced"]:
                row["measured_bytes"] = traced(comm, [*cfg["run"], *flags])
    for row, flags, priced_with in zip(rows, cfg["flags"], seconds):
        if "not_run" not in row:
            with refusal(row):
                run = load_config([*cfg["run"], *flags], world_size=comm.size)
                row["rounds_s"] = [timed(comm, run, cfg, priced_with)]
    return rows


def timed(comm, cfg, settings: dict, priced_with=None) -> float:
    """The median of the slowest rank's seconds over ``repeats`` steps after ``warmup``, each
    from a barrier, of the training command's trainer, or of a stand-in sleeping the compute
    ``priced_with`` gives its largest rows, pro rata; the run then ended as training ends it."""
    trainer = build_trainer(cfg, comm) if priced_with is None else \
        build_sleeping(cfg, comm, *max(priced_with))
    seconds = steps(trainer, cfg.train.batch_size, settings["repeats"], settings["warmup"],
                    start=lambda: sync(comm))
    trainer.strategy.shutdown()
    trainer.strategy.finish()
    trainer.strategy.close()
    return float(np.median(slowest(comm, [seconds])[0]))
