"""The asynchronous benchmark's problems: fresh tasks, runs copied as they go, held-out loss."""

from __future__ import annotations

import time

import numpy as np

from ... import nn
from ...autograd import functional as F
from ...backend import to_device, to_host
from ...comm.flat import Layout
from ...data import LowRankRatings, SparseLogistic, SyntheticClassification
from ...train.task import HALF_SQUARED, Task

SPARSE = ("sparse-logreg", "matrix-factorization")  # a step touches a few rows of θ


def task(name: str, cfg: dict) -> Task:
    """Problem ``name``'s data (seed 0) and a fresh float32 model (seed 0), sized by ``cfg``, as
    the training CLI has them (scratchpar/train/task.py)."""
    gen = np.random.default_rng(0)
    if name == "sparse-logreg":
        return Task(SparseLogistic(cfg["n_features"], cfg["nnz"], seed=0),
                    nn.SparseLogisticRegression(cfg["n_features"], gen), "sample",
                    F.binary_cross_entropy_with_logits)
    if name == "matrix-factorization":
        users, items, rank = cfg["n_users"], cfg["n_items"], cfg["rank"]
        return Task(LowRankRatings(users, items, rank, cfg["noise"], seed=0),
                    nn.MatrixFactorization(users, items, rank, gen), "sample",
                    nn.half_squared_error, HALF_SQUARED)
    if name == "dense-mlp":  # a step touches every parameter
        return Task(SyntheticClassification(cfg["n_features"], cfg["n_classes"], seed=0),
                    nn.MLP([cfg["n_features"], *cfg["hidden"], cfg["n_classes"]], gen), "sample")
    raise ValueError(f"no problem {name!r}")


def flat(arrays) -> np.ndarray:
    """``arrays`` end to end as one host vector (K,), as Hogwild's window lays θ out."""
    return np.concatenate([to_host(a).reshape(-1) for a in arrays])


def snapshot_run(comm, strategy, batches: list, snapshots: int, read) -> dict | None:
    """``strategy.step`` over ``batches`` on every rank of ``comm`` from a barrier, then its
    shutdown and close. Rank 0 copies θ, ``read()`` (K,), at the start, ``snapshots`` times in
    the run and after the shutdown, racing any writers as every reader does; it returns each
    rank's seconds, the shutdown's report and the copies (seconds, steps, θ)."""
    every = max(1, len(batches) // snapshots)
    comm.barrier()
    start = time.perf_counter()
    copies = [(0.0, 0, read())] if comm.rank == 0 else []
    for k, batch in enumerate(batches):
        strategy.step(batch)
        if comm.rank == 0 and (k + 1) % every == 0:
            copies.append((time.perf_counter() - start, k + 1, read()))
    per_rank = comm.allgather_obj(time.perf_counter() - start, "a run's seconds")
    report = strategy.shutdown()
    copies += [(max(per_rank), len(batches), read())] if comm.rank == 0 else []
    strategy.close()
    return None if comm.rank else {"seconds": max(per_rank), "per_rank_s": per_rank,
                                   "steps": len(batches), "report": report, "snapshots": copies}


def curve(t: Task, run: dict, cfg: dict, per_step: int = 1) -> dict:
    """``run`` with its copies of θ replaced by [seconds, updates, held-out loss per sample]
    (``t``'s model loaded with each, over ``cfg``'s held-out batches), ``per_step`` updates a
    step."""
    params = t.model.parameters()
    layout, points = Layout([p.shape for p in params]), []
    for seconds, k, theta in run.pop("snapshots"):
        layout.unpack(to_device(theta), [p.data for p in params])
        points.append([seconds, k * per_step, t.evaluate(cfg["eval_batches"], cfg["eval_rows"])])
    return {**run, "curve": points, "updates": run["steps"] * per_step}
