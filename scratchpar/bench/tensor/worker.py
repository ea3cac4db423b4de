"""One rank of the tensor benchmark: a block's collectives, its bytes, an MLP's speed-up."""

from __future__ import annotations

import numpy as np

from ... import backend
from ...autograd import Tensor
from ...autograd.held import graph_bytes
from ...comm.chunks import bounds
from ...nn import GELU, Block, Dropout, Linear, Sequential
from ...parallel.tensor import ParallelFeedForward
from ...parallel.tensor.block import ParallelBlock, SequenceParallelBlock
from ...trace.tracer import Tracer
from ..timing import alone, fresh, turns

LAYERS = {"tensor": ParallelBlock, "sequence": SequenceParallelBlock}
PASSES = ("forward", "backward")


def whole_input(shape: tuple, seed: int):
    """The same float32 array on every rank (host)."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def block_input(cfg: dict, comm, layer: str) -> Tensor:
    """X[B,T,C], or this rank's sequence shard X[B,T_r,C] (``chunks.bounds(T, t)``)."""
    x = whole_input((cfg["batch"], cfg["seq"], cfg["d_model"]), 1)  # (B, T, C)
    if layer == "sequence":
        start, stop = bounds(cfg["seq"], comm.size)[comm.rank]
        x = x[:, start:stop]  # (B, T_r, C)
    return Tensor(backend.to_device(np.ascontiguousarray(x)), requires_grad=True)


class Exchanges:
    """Counts ``comm.allgather_obj`` calls (pickled metadata, which the tracer does not
    record) while installed on the communicator instance."""

    def __init__(self, comm):
        self.comm, self.calls, self._inner = comm, 0, comm.allgather_obj

    def __enter__(self) -> Exchanges:
        self.comm.allgather_obj = self._counted
        return self

    def __exit__(self, *exc) -> None:
        del self.comm.allgather_obj  # the class's method again

    def _counted(self, obj, what: str = "metadata exchange") -> list:
        self.calls += 1
        return self._inner(obj, what)


def comm_ops(events, region) -> dict[str, list[int]]:
    """The collectives recorded inside ``region``: op (the name before the algorithm, as in
    "all_reduce/recursive_doubling") → the bytes of each, in order."""
    ops: dict[str, list[int]] = {}
    for e in events:
        if e.cat == "comm" and region.start <= e.start and e.end <= region.end:
            ops.setdefault(e.name.split("/")[0], []).append(e.bytes)
    return ops


def one_layer(block: Block, comm, cfg: dict, layer: str) -> dict:
    """One forward and one backward of this rank's shard of ``block``, traced: the collectives
    and metadata exchanges of each pass, and the bytes this rank holds."""
    model, x = LAYERS[layer](block, comm), block_input(cfg, comm, layer)
    params = model.parameters()
    tracer = comm.tracer = Tracer(comm.rank)
    calls = {}
    with Exchanges(comm) as exchanges:
        with tracer.region("forward", "compute"):
            out = model(x)  # (B, T, C) or (B, T_r, C)
        calls["forward"] = exchanges.calls
        held = graph_bytes(out, params)  # the input x included, parameters not
        with tracer.region("backward", "compute"):
            out.backward(out.xp.ones_like(out.data))
        calls["backward"] = exchanges.calls - calls["forward"]
    comm.tracer = None
    regions = {e.name: e for e in tracer.events if e.cat == "compute"}
    return {"collectives": {p: comm_ops(tracer.events, regions[p]) for p in PASSES},
            "exchanges": calls, "param_bytes": int(sum(p.data.nbytes for p in params)),
            "grad_bytes": int(sum(p.grad.nbytes for p in params if p.grad is not None)),
            "activation_bytes": held}


def transformer_mlp(c: int) -> Sequential:
    """The MLP of ``nn.Block``: Linear(C, 4C), GELU, Linear(4C, C), dropout 0 (seed 0)."""
    gen = np.random.default_rng(0)
    return Sequential(Linear(c, 4 * c, gen), GELU(), Linear(4 * c, c, gen), Dropout(0.0))


def timed_mlp(cfg: dict, comm) -> dict:
    """Medians of the one-device MLP on rank 0 and of ParallelFeedForward over the group, in
    turns, and how far the split's output is from one device's."""
    shape = (cfg["tokens"], cfg["d_model"])  # (N, C)
    x_host, dy = whole_input(shape, 1), backend.to_device(whole_input(shape, 2))
    x_one, x_split = (Tensor(backend.to_device(x_host), requires_grad=True) for _ in range(2))
    one = transformer_mlp(cfg["d_model"])
    split = ParallelFeedForward(transformer_mlp(cfg["d_model"]), comm)
    diff = float(abs(backend.to_host(split(x_split).data - one(x_one).data)).max())
    timed = turns(comm, {"alone": alone(fresh(one, x_one, lambda: one(x_one).backward(dy)), comm),
                         "tensor": fresh(split, x_split, lambda: split(x_split).backward(dy))},
                  cfg["repeats"], cfg["warmup"])
    return {"timed": timed, "max_abs_diff": diff}


def measure(comm, cfg: dict) -> dict:
    """The t ranks are one tp group. A ParallelBlock and a SequenceParallelBlock (float32,
    dropout 0) cut from one ``nn.Block``: each one's collectives and holdings; with ``"time"``,
    the transformer MLP alone (rank 0, the others asleep) and split, in turns."""
    b = cfg["block"]
    block = Block(b["d_model"], b["heads"], np.random.default_rng(0), dropout=0.0)
    x = block_input(b, comm, "tensor")
    one = {"param_bytes": int(sum(p.data.nbytes for p in block.parameters())),
           "activation_bytes": graph_bytes(block(x), block.parameters())}
    mine = {layer: one_layer(block, comm, b, layer) for layer in LAYERS}
    result = {"world_size": comm.size, "one_device": one,
              "per_rank": comm.allgather_obj(mine, "tensor holdings")}
    if cfg["time"]:
        result["mlp"] = timed_mlp({**cfg["mlp"], "warmup": cfg["warmup"],
                                   "repeats": cfg["repeats"]}, comm)
    return result
