"""Throughput against the batch on one device: it grows while the device has idle capacity
(every op's fixed cost is shared by more rows), then flattens once the device is saturated, and
memory ends it.

Each point is the training command's own one-device step (``--strategy single``) at that batch:
the median of ``repeats`` steps after ``warmup``, the least of ``rounds`` rounds taken in turns
over the batches, so that a burst of other load spoils one round, not a point. A batch the
training command refuses (its memory estimate, its rules) ends the sweep with the reason.
"""

from __future__ import annotations

import statistics

from ..comm.agree import RankErrors
from ..timing import least, steps
from ..train.build import build_trainer
from ..train.cli import load_config
from ..train.option import ConfigError

KNEE = 1.10  # doubling the batch past the knee gains less than this factor of throughput


def step_seconds(trainer, batch: int, repeats: int, warmup: int) -> float:
    """The median seconds of one step of ``trainer`` on batches of ``batch`` rows (the
    batches ``warmup`` … ``warmup + repeats − 1`` of its data are the ones timed)."""
    return statistics.median(steps(trainer, batch, repeats, warmup))


def mean_units(task, batch: int, repeats: int, warmup: int) -> float:
    """The mean units (tokens, samples) of the batches :func:`step_seconds` times."""
    return statistics.mean(float(task.count(task.batch(k, batch)[0]))
                           for k in range(warmup, warmup + repeats))


def sweep(flags: list[str], batches: list[int], repeats: int, warmup: int,
          rounds: int) -> list[dict]:
    """Per batch size: rows and units per second of the one-device step, or why it did not
    run (``refused``; every larger batch is left out)."""
    trainers, found = {}, []
    for batch in batches:
        row = {"batch": batch}
        try:
            trainers[batch] = build_trainer(load_config(
                [*flags, "--strategy", "single", "--batch-size", str(batch), "--no-progress"]))
        except (ConfigError, RankErrors) as e:
            found.append({**row, "refused": str(e).splitlines()[-1].strip(" -")})
            break
        found.append(row)
    best = least(list(trainers), lambda batch: (step_seconds(trainers[batch], batch, repeats,
                                                               warmup),), rounds)
    for row in found:
        if row["batch"] in best:
            (seconds,), task = best[row["batch"]], trainers[row["batch"]].task
            row.update(seconds=seconds, units=mean_units(task, row["batch"], repeats, warmup),
                       unit=task.unit)
            row.update(rows_per_s=row["batch"] / seconds, units_per_s=row["units"] / seconds)
    return found


def knee(rows: list[dict]) -> int | None:
    """The first batch past which doubling gains less than ``KNEE``× the rows per second:
    the device is saturated there. None where every doubling measured still gained."""
    ran = [r for r in rows if "rows_per_s" in r]
    for small, big in zip(ran, ran[1:]):
        if big["batch"] == 2 * small["batch"] and big["rows_per_s"] < KNEE * small["rows_per_s"]:
            return small["batch"]
    return None
