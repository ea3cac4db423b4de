"""At 4 ranks, under ZeRO-3 and under tp 2 × pp 2, no rank holds the whole model to build the
strategy, to train, to score a held-out batch, to save a checkpoint or to resume from one.
Building from a model made under ``nn.deferred()`` (its blocks drawn on the ranks that hold
them), scoring and saving add less than half the model's weights to what the rank held
(building it whole, or gathering it as rank 0 once did, adds all); a training step, with its
gathers, gradients and Adam's moments, less than the weights; resuming a few times its own
share of the state, not the whole of it."""

import math

import numpy as np
import pytest
from device_helpers import on_device

from scratchpar import nn
from scratchpar.comm.mesh import Mesh
from scratchpar.optim import Adam
from scratchpar.parallel.hybrid import Hybrid
from scratchpar.parallel.pipeline import partition, schedules
from scratchpar.parallel.pipeline.partition import parameter_counts
from scratchpar.parallel.zero.stage3 import ZeRO3
from scratchpar.peak import peak_bytes
from scratchpar.train.sharded import save_sharded
from scratchpar.train.stored import open_checkpoint
from scratchpar.train.task import Task

VOCAB, SEQ, WIDTH, DEPTH = 16, 8, 128, 16  # equal blocks: weights outweigh the index, and a
# step's gathers (three blocks), its gradient share and its activations stay below them


def task() -> Task:
    with nn.deferred():
        model = nn.GPT(VOCAB, SEQ, WIDTH, 4, DEPTH, np.random.default_rng(3), dtype=np.float32)
    return Task(None, model, "tok")


def batch(seed: int):
    return on_device(np.random.default_rng(seed).integers(1, VOCAB, (8, SEQ + 1)))


def zero3(comm):
    made = task()
    return ZeRO3(made.model, lambda p: Adam(p, lr=1e-3), made, Mesh(comm)), made


def hybrid(comm):
    made = task()
    mesh = Mesh(comm, dp=1, pp=2, tp=2)
    ranges = partition(parameter_counts(made.model.pipeline_layers()), 2)
    return Hybrid(made.model, lambda p: Adam(p, lr=1e-3), made, mesh,
                  schedule=schedules.build("1f1b", 2, 2, 1), ranges=ranges), made


@pytest.mark.parametrize("build", [zero3, hybrid])
def test_no_moment_of_a_run_holds_the_whole_model(comm, tmp_path, build):
    if comm.size != 4:
        pytest.skip("the layouts are 4 ranks'")
    with peak_bytes() as building:
        strategy, made = build(comm)
    weights = 4 * sum(math.prod(s) for s in [p.shape for p in task().model.parameters()])
    strategy.step(batch(0))  # Adam's moments made: a share, as the state the rank keeps
    with peak_bytes() as training:
        strategy.step(batch(1))
    directory = comm.allgather_obj(str(tmp_path / "ck"))[0]
    with peak_bytes() as scoring:
        made.model.eval()
        strategy.score(batch(9), made)
    pieces, scalars = strategy.pieces()
    share = sum(p.array.nbytes for p in pieces)  # the weights and moments this rank holds
    with peak_bytes() as saving:
        save_sharded(directory, pieces, scalars, {"step": 2}, comm)
    resumed, _ = build(comm)
    with peak_bytes() as resuming, open_checkpoint(directory) as stored:
        resumed.load_pieces(stored)
    added = {"building": building.bytes, "training": training.bytes, "scoring": scoring.bytes,
             "saving": saving.bytes, "resuming": resuming.bytes}
    everyone = comm.allgather_obj((added, share))
    for rank, (seen, share) in enumerate(everyone):
        what = (rank, seen, share, weights)
        assert max(seen[k] for k in ("building", "scoring", "saving")) < weights / 2, what
        assert seen["training"] < weights, what
        # its blocks read (its share), its moments copied into the optimizer, and the index:
        # a share, not the whole state (3 × the weights) that every rank once read
        assert seen["resuming"] < 3 * share < 3 * weights, what
    strategy.close()
    resumed.close()
    if isinstance(strategy, Hybrid):
        strategy.mesh.free()
        resumed.mesh.free()
