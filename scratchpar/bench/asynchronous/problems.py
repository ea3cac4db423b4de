"""The asynchronous benchmark's problems: data, fresh models, timed runs and held-out loss."""

from __future__ import annotations

import time

import numpy as np

from ... import nn
from ...autograd import functional as F
from ...autograd import no_grad
from ...backend import get_array_module, to_device, to_host
from ...data import LowRankRatings, SparseLogistic, SyntheticClassification
from ...train.task import EVAL_OFFSET, Task

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
    """The held-out batches, on the device: positions no training run reaches."""
    return [rows(data.batch(EVAL_OFFSET + i, cfg["eval_rows"]), 0, cfg["eval_rows"])
            for i in range(cfg["eval_batches"])]


def flat(params) -> np.ndarray:
    """The parameters as one host vector (K,), in ``model.parameters()`` order (Hogwild's θ)."""
    return np.concatenate([to_host(p.data).reshape(-1) for p in params])


def timed_run(comm, step, batches: list, every: int, copy) -> tuple[float, list]:
    """``step(batch)`` over ``batches`` from a barrier; rank 0 takes ``copy(k, seconds)`` at the
    start and after every ``every`` steps: the clock at the start, and rank 0's copies."""
    comm.barrier()
    start = time.perf_counter()
    copies = [copy(0, 0.0)] if comm.rank == 0 else []
    for k, batch in enumerate(batches):
        step(batch)
        if comm.rank == 0 and (k + 1) % every == 0:
            copies.append(copy(k + 1, time.perf_counter() - start))
    return start, copies


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
