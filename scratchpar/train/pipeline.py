"""The pipeline and hybrid strategies from a Config: the mesh, the schedule, the layers of each
stage, and each stage's tensor-parallel shard."""

from __future__ import annotations

from ..comm.mesh import Mesh, draw
from ..parallel.hybrid import Hybrid
from ..parallel.pipeline import PipeDream, Pipeline, partition, schedules
from ..parallel.pipeline.partition import describe, layer_names, layer_times, parameter_counts


def build_pipeline(cfg, task, comm):
    """``--strategy pipeline`` or ``hybrid``: ``--dp`` replicas of ``--pp`` stages, each stage
    the layers that ``--balance`` gives it (rank 0 says which), split over ``--tp`` ranks."""
    from .build import build_optimizer

    t = cfg.train
    mesh = Mesh(comm, dp=t.replicas(comm.size), pp=t.pp, tp=t.tp)
    schedule = schedules.build(t.pp_schedule, t.pp, t.m, t.virtual)
    layers = task.model.pipeline_layers()
    if t.balance == "time":  # rank 0 measures, so that every rank partitions alike
        weights = layer_times(layers, _example(task, t, mesh.dp)) if comm.rank == 0 else None
        weights, unit = comm.allgather_obj(weights, "layer times")[0], "s"
    else:
        weights, unit = parameter_counts(layers), "params"
    ranges = partition(weights, t.pp * t.virtual)
    if comm.rank == 0:
        lines = describe(ranges, layer_names(task.model), weights, unit).splitlines()
        if t.virtual > 1:  # virtual stage k is chunk k // p of rank k % p
            lines = [f"{line} → rank {k % t.pp}, chunk {k // t.pp}" for k, line in enumerate(lines)]
        if t.strategy == "hybrid":  # the grid of ranks, then each stage's layers
            lines = [draw(mesh.shape), *lines,
                     f"each stage's matrices split over its {t.tp} tp ranks, heads and vocabulary "
                     "included" + (", its sequence too" if t.sequence_parallel else "")]
        print("\n".join(lines), flush=True)
    make_optimizer = lambda params: build_optimizer(cfg, params)  # noqa: E731
    knobs = {"grad_clip": cfg.optim.grad_clip, "bucket_bytes": t.bucket_bytes}
    if t.strategy == "hybrid":
        return Hybrid(task.model, make_optimizer, task, mesh, schedule, ranges,
                      t.sequence_parallel, **knobs)
    cls = PipeDream if t.pp_schedule == "pipedream" else Pipeline
    return cls(task.model, make_optimizer, task, mesh, schedule, ranges, **knobs)


def _example(task, t, dp: int):
    """The inputs of one micro-batch of a replica, to time each layer on."""
    batch, _ = task.batch(0, max(1, t.batch_size // dp // t.m))
    return task.split(batch)[0]
