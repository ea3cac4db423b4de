"""One rank of the branches benchmark: a Towers step alone on rank 0 and split by branch."""

from __future__ import annotations

import numpy as np

from ... import backend
from ...autograd import Tensor
from ...autograd import functional as F
from ...autograd.held import graph_bytes
from ...nn import Towers
from ...parallel import ParallelBranches
from ..timing import Timed, alone, fresh, turns


def towers(cfg: dict) -> Towers:
    """The same float32 Towers on every rank and for every contender (seed 0)."""
    return Towers(cfg["features"], cfg["sizes"], cfg["k"], cfg["classes"],
                  np.random.default_rng(0), dtype=np.float32)


def loss_of(model, x: Tensor, y):
    return F.cross_entropy(model(x), y)


def step(model, x: Tensor, y) -> Timed:
    """Forward and backward: the work the split divides."""
    return fresh(model, x, lambda: loss_of(model, x, y).backward())


def holdings(model, x: Tensor, y) -> dict:
    """What this rank holds for ``model``: parameter bytes, and the bytes one forward's graph
    keeps (the input included), with that forward's loss."""
    params = model.parameters()
    loss = loss_of(model, x, y)
    return {"param_bytes": int(sum(p.data.nbytes for p in params)),
            "activation_bytes": graph_bytes(loss, params), "loss": float(loss.item())}


def measure(comm, cfg: dict) -> dict:
    """"alone" (the single-device model on rank 0, the others asleep) and "branches"
    (``ParallelBranches`` over every rank) in turns on the same batch; then what each holds."""
    gen = np.random.default_rng(1)
    x_host = gen.standard_normal((cfg["batch"], cfg["features"])).astype(np.float32)  # (B, F)
    y = backend.to_device(gen.integers(0, cfg["classes"], cfg["batch"]))  # (B,)
    x_one, x_split = (Tensor(backend.to_device(x_host), requires_grad=True) for _ in range(2))
    one = towers(cfg)
    split = ParallelBranches(towers(cfg), comm)  # the whole model it came from is freed
    timed = turns(comm, {"alone": alone(step(one, x_one, y), comm),
                         "branches": step(split, x_split, y)}, cfg["repeats"], cfg["warmup"])
    mine = {"towers": len(split.towers), **holdings(split, x_split, y)}
    return {"world_size": comm.size, "timed": timed, "one_device": holdings(one, x_one, y),
            "per_rank": comm.allgather_obj(mine, "branches holdings")}
