"""The asynchronous benchmark's problems: data, fresh models, timed runs and held-out loss."""

from __future__ import annotations

import time

import numpy as np

from ... import nn
from ...autograd import functional as F
from ...autograd import no_grad
from ...backend import get_array_module, to_device, to_host
from ...data import LowRankRatings, SparseLogistic, SyntheticClassification
from ...train.task import Task

SPARSE = ("sparse-logreg", "matrix-factorization")  # a step touches a few rows of θ
DENSE = "dense-mlp"  # a step touches every parameter


def dataset(name: str, cfg: dict):
    """Problem ``name``'s data source (seed 0), sized by its ``cfg``."""
    if name == "sparse-logreg":
        return SparseLogistic(cfg["n_features"], cfg["nnz"], seed=0)
    if name == "matrix-factorization":
        return LowRankRatings(cfg["n_users"], cfg["n_items"], cfg["rank"], cfg["noise"], seed=0)
    if name == DENSE:
        return SyntheticClassification(cfg["n_features"], cfg["n_classes"], seed=0)
    raise ValueError(f"no problem {name!r}")


def task(name: str, cfg: dict, data) -> Task:
    """A fresh float32 model of problem ``name`` (seed 0) on ``data``, as the training CLI has
    it (scratchpar/train/task.py)."""
    gen = np.random.default_rng(0)
    if name == "sparse-logreg":
        return Task(data, nn.SparseLogisticRegression(cfg["n_features"], gen), "sample",
                    F.binary_cross_entropy_with_logits)
    if name == "matrix-factorization":
        return Task(data, nn.MatrixFactorization(cfg["n_users"], cfg["n_items"], cfg["rank"],
                                                 gen), "sample", nn.half_squared_error,
                    "½·squared error")
    return Task(data, nn.MLP([cfg["n_features"], *cfg["hidden"], cfg["n_classes"]], gen),
                "sample")


def rows(pool: tuple, start: int, stop: int) -> tuple:
    """Samples ``start:stop`` of the host ``pool``, on the device."""
    return tuple(to_device(a[start:stop]) for a in pool)


def held_out(data, cfg: dict) -> list[tuple]:
    """The held-out batches, on the device: draws no training run reaches."""
    return [rows(data.held_out(i, cfg["eval_rows"]), 0, cfg["eval_rows"])
            for i in range(cfg["eval_batches"])]


def flat(params) -> np.ndarray:
    """The parameters as one host vector (K,), in ``model.parameters()`` order (Hogwild's θ)."""
    return np.concatenate([to_host(p.data).reshape(-1) for p in params])


def snapshot_run(comm, strategy, batches: list, snapshots: int, read) -> dict | None:
    """``strategy.step`` over ``batches`` on every rank of ``comm`` from a barrier, then its
    shutdown and close. Rank 0 copies the parameters ``read()`` (a host vector (K,)) at the
    start, ``snapshots`` times in the run and after the shutdown, racing any writers as every
    reader does, and returns the run: each rank's seconds, the shutdown's report and the
    copies (seconds, steps, θ)."""
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


def curve(t: Task, run: dict, batches: list[tuple], per_step: int = 1) -> dict:
    """A run with its copies replaced by the held-out loss of each, [seconds, updates, loss],
    at ``per_step`` updates a step."""
    points = [[s, k * per_step, evaluate(t, theta, batches)] for s, k, theta in run["snapshots"]]
    return {**{k: v for k, v in run.items() if k != "snapshots"}, "curve": points,
            "updates": run["steps"] * per_step}


def evaluate(t: Task, snapshot: np.ndarray, batches: list[tuple]) -> float:
    """Held-out loss per sample of ``t``'s model with the parameters ``snapshot`` (K,)."""
    start = 0
    for p in t.model.parameters():
        get_array_module(p.data).copyto(p.data, to_device(snapshot[start:start + p.size]
                                                          .reshape(p.shape), dtype=p.dtype))
        start += p.size
    total = units = 0.0
    with no_grad():
        for batch in batches:
            total += t.loss(t.model, batch, reduction="sum").item()
            units += len(batch[-1])
    return total / units
