"""Steps to a target loss against the batch, each batch at its best learning rate (Shallue et
al. 2019, §3.3: a small sweep per batch size), then the regimes fitted (``plan/regimes.py``).

Every run is the training command's own, on one device, at a constant rate after a short
warm-up, stopped by ``--target-loss`` at the first record whose training loss (the mean over
the steps of at least a fixed number of rows) meets the floor plus ``gap``: on a synthetic
source each batch is fresh data, so the training loss estimates the population's. Each batch
is run from a few seeds, and its figure is the median seed's. Each run also measures the
gradient noise scale (``--noise-scale``), whose value where the target is met sits beside the
fitted B_crit (McCandlish et al. 2018, §2.3).
"""

from __future__ import annotations

import json
import os
import tempfile

from ..train.build import build_trainer
from ..train.cli import load_config


def one_device(argv: list[str]) -> tuple[dict, list[dict]]:
    """The training command's run of ``argv`` on one device, its metrics in a scratch file:
    rank 0's summary and the step records."""
    with tempfile.TemporaryDirectory(prefix="scratchpar-batch-") as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        summary = build_trainer(load_config([*argv, "--strategy", "single", "--no-progress",
                                             "--metrics", metrics])).run()
        with open(metrics) as f:
            return summary, [r for r in map(json.loads, f) if r["event"] == "step"]


def steps_to(flags: list[str], batch: int, lr: float, target: float, most: int,
             every: int, noise: bool = True) -> dict:
    """One run of ``flags`` at ``batch`` rows and rate ``lr`` until its training loss meets
    ``target`` or ``most`` steps pass: the step it was met at (None: not met), B_simple there
    (with ``noise``) and the seconds the training took."""
    summary, records = one_device([
        *flags, "--batch-size", str(batch), "--lr", repr(lr), "--schedule", "constant",
        "--warmup", str(min(10, most - 1)), "--steps", str(most), "--log-every", str(every),
        f"--target-loss={target!r}", *(["--noise-scale"] if noise else []),
        "--eval-batches", "1"])
    return {"lr": lr, "steps": summary["reached_step"],
            "b_simple": records[-1].get("noise_scale"), "seconds": summary["elapsed_s"]}


def predicted_seconds(flags: list[str], batch: int, steps: float, profile) -> dict:
    """The planner's one-device step at ``batch`` rows (``plan.predict`` with this model's
    compute timed here), and ``steps`` of it: the time to the target it predicts."""
    from ..device_rng import DeviceRandom
    from ..plan.compute import measured
    from ..plan.predict import predict
    from ..train.task import build_task

    cfg = load_config([*flags, "--strategy", "single", "--batch-size", str(batch)])
    task = build_task(cfg, DeviceRandom(cfg.train.seed, 1, 0))
    step = predict(cfg, 1, profile, lambda rows: measured(task, rows, 10, 3)).step_s
    return {"batch": batch, "step_s": step, "steps": steps, "seconds": step * steps}


def floor_of(flags: list[str]) -> float:
    """The source's loss floor (the synthetic language's entropy rate), from its own run."""
    from ..device_rng import DeviceRandom
    from ..train.task import build_task

    cfg = load_config([*flags, "--strategy", "single"])
    return build_task(cfg, DeviceRandom(cfg.train.seed, 1, 0)).floor()


def every_for(batch: int, rows: int) -> int:
    """The steps one reading of the training loss averages, so that it covers at least
    ``rows`` rows. A batch's loss is a sample mean over its rows: read step by step, a small
    batch's is so noisy that it dips below a target by luck, long before the model is there,
    and small batches would look cheaper than they are. Read over the same rows, every batch's
    reading is alike noisy."""
    return max(1, -(-rows // batch))


def sweep(flags: list[str], batches: list[int], rates: list[float], gap: float, most: int,
          rows: int, seeds: int = 1) -> dict:
    """For each batch and seed, every rate's steps to floor + ``gap`` (the training loss read
    over at least ``rows`` rows, :func:`every_for`) and that seed's best (:func:`best_rate`);
    the batch's figure is the median seed's best (:func:`median_seed`)."""
    target = floor_of(flags) + gap
    found = []
    for batch in batches:
        every = every_for(batch, rows)
        tries = [{"seed": seed, **best_rate([*flags, "--seed", str(seed)], batch, rates, target,
                                            most, every)} for seed in range(seeds)]
        found.append({"batch": batch, "every": every, "seeds": tries,
                      "best": median_seed(tries)})
    return {"target": target, "rows": found}


def best_rate(flags: list[str], batch: int, rates: list[float], target: float, most: int,
              every: int) -> dict:
    """Every rate's steps to ``target`` and the best: the fewest steps (the first rate on a
    tie), None where no rate met it within ``most`` steps. A rate runs at most as many steps
    as the best before it took: one that cannot beat it stops there, and counts as not met."""
    runs, cap = [], most
    for lr in rates:
        runs.append(steps_to(flags, batch, lr, target, cap, every))
        cap = min(cap, runs[-1]["steps"] or cap)
    met = [r for r in runs if r["steps"] is not None]
    return {"runs": runs, "best": min(met, key=lambda r: r["steps"]) if met else None}


def median_seed(tries: list[dict]) -> dict | None:
    """The best run of the median seed, by steps, a seed that never met the target counting
    as slower than any (None where that is the median): a real run, its rate and its
    B_simple, not a mixture of several."""
    middle = _lower_middle(tries, lambda t: t["best"] and t["best"]["steps"])
    return None if middle["best"] is None else {"seed": middle["seed"], **middle["best"]}


def median_steps(values: list[int | None]) -> int | None:
    """The median of steps counts, the lower middle, None (not met) counting as the most."""
    return _lower_middle(values, lambda v: v)


def _lower_middle(items: list, steps_of):
    """The lower middle of ``items`` ranked by ``steps_of(item)``, None counting as the most."""
    ranked = sorted(items, key=lambda item: (steps_of(item) is None, steps_of(item) or 0))
    return ranked[(len(ranked) - 1) // 2]
