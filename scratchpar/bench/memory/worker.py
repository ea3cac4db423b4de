"""One rank of the memory benchmark: a layer's activations, a GPipe stage's per micro-batch,
a step's time and peak (the model states are the ZeRO benchmark's memory part)."""

from __future__ import annotations

import numpy as np

from ... import backend, nn
from ...autograd import Tensor
from ...autograd.held import graph_bytes
from ...autograd.precision import dtype_of
from ...comm.mesh import Mesh
from ...device_rng import DeviceRandom
from ...nn.recompute import chosen, recompute
from ...optim import AdamW
from ...optim.scaler import LossScaler
from ...parallel.pipeline import Pipeline, schedules
from ...parallel.pipeline.stage import release
from ...peak import peak_bytes
from ...train.defaults import ADAM_LR
from ..tensor.driver import LAYERS, block_input
from ..timing import interleaved, stepping
from ..zero.worker import build, gpt, language

MODES = ("none", "selective", "full")


def layer_bytes(size: dict, comm, layer: str, precision: str, mode: str) -> int:
    """Bytes this rank's graph of one layer (``nn.Block`` or a shard of it) keeps for backward
    with dropout, recomputing ``mode``: not its output, nor its input unless it keeps it."""
    dtype = dtype_of(precision, backend.xp_default())
    block = nn.Block(size["d_model"], size["heads"], np.random.default_rng(0),
                     dropout=size["dropout"]).to_dtype(dtype)
    model = block if layer == "block" else LAYERS[layer](block, comm)
    nn.set_dropout_generator(model, DeviceRandom(0, 0))  # one stream: a tp group draws alike
    recompute([model] if mode == "full" else chosen(model, mode))  # full: the whole layer
    x = Tensor(block_input(size, comm, layer).data.astype(dtype), requires_grad=True)
    out = model(x)  # (B, T, C) or (B, T_r, C)
    kept = graph_bytes(out, [*model.parameters(), x]) - out.data.nbytes  # input, output aside
    return kept + (x.data.nbytes if mode == "full" else 0)  # the input, where it is kept


def activations(comm, cfg: dict) -> dict:
    """Every rank's :func:`layer_bytes` at each size, precision and recomputation: ``nn.Block``
    in a world of one, else its tensor- and sequence-parallel shards."""
    layers = ("block",) if comm.size == 1 else tuple(LAYERS)
    mine = {f"{i} {layer} {precision} {mode}": layer_bytes(size, comm, layer, precision, mode)
            for i, size in enumerate(cfg["layers"]) for layer in layers
            for precision in cfg["precisions"] for mode in MODES}
    return {"ranks": comm.allgather_obj(mine, "layer bytes")}


def stash(comm, cfg: dict) -> dict:
    """Per recomputation and micro-batch count m, this rank's peak over its GPipe stage's second
    step, the boundary bytes the runtime held at once, and the stage's blocks."""
    size, rows, out = cfg["stash"]["size"], cfg["stash"]["rows"], {}
    for mode in MODES:
        for m in cfg["stash"]["micro"]:
            task, batches = language({**size, "batch": rows * m, "steps": 2})
            model, mesh = gpt(size), Mesh(comm, pp=comm.size)
            pipe = Pipeline(model, lambda params: AdamW(params, ADAM_LR), task, mesh,
                            schedule=schedules.build("gpipe", comm.size, m, 1), recompute=mode)
            release(model, pipe.params)  # a rank keeps its stage's weights, as in a run
            pipe.step(batches[0])  # allocates what steps keep
            with peak_bytes() as seen:
                pipe.step(batches[1])
            out[f"{mode} {m}"] = {"peak": seen.bytes, "boundary": pipe.runtime.peak_bytes,
                                  "blocks": sum(isinstance(layer, nn.Block)
                                                for chunk in pipe.stage.chunks
                                                for layer in chunk)}
            pipe.close()
            mesh.free()
    return {"ranks": comm.allgather_obj(out, "stash bytes")}


def steps(comm, cfg: dict) -> dict:
    """Per size, one device's step in each (precision, recomputation) of ``cfg["cases"]`` in
    turns: the median seconds, and the peak bytes of one step more."""
    out = {}
    for i, size in enumerate(cfg["steps"]):
        runs = {}
        for precision, mode in cfg["cases"]:
            task, (batch,) = language({**size, "steps": 1})
            task.scaler = LossScaler(scale=2.0**8) if precision == "fp16" else None
            spec = {**size, "precision": precision, "recompute": mode}
            runs[f"{precision} {mode}"] = stepping(build("single", spec, task), batch)
        samples = interleaved(runs, cfg["repeats"], cfg["warmup"])
        for name, run in runs.items():
            with peak_bytes() as seen:
                run()
            out[f"{i} {name}"] = {"median_s": float(np.median(samples[name])),
                                  "peak_bytes": seen.bytes}
    return out
