"""A model built under ``nn.deferred()`` trains, under every strategy that draws only its
parts (ZeRO-3's chunks, a pipeline's stage, a hybrid's tp shards of it), bit for bit as the
eager model does; ranks that built different models are refused before any step."""

import numpy as np
import pytest
from device_helpers import host, on_device

from scratchpar import nn
from scratchpar.comm.mesh import Mesh
from scratchpar.optim import Adam
from scratchpar.parallel.hybrid import Hybrid
from scratchpar.parallel.pipeline import Pipeline, partition, schedules
from scratchpar.parallel.pipeline.partition import parameter_counts
from scratchpar.parallel.zero.stage3 import ZeRO3
from scratchpar.train.task import Task


def task(deferring: bool, seed: int = 3) -> Task:
    def build():
        return nn.GPT(16, 8, 24, 4, 4, np.random.default_rng(seed), dtype=np.float64)
    if deferring:
        with nn.deferred():
            return Task(None, build(), "tok")
    return Task(None, build(), "tok")


def zero3(comm, made):
    return ZeRO3(made.model, lambda p: Adam(p, lr=1e-2), made, Mesh(comm))


def staged(comm, made, tp: int):
    mesh = Mesh(comm, dp=comm.size // (2 * tp) or 1, pp=min(2, comm.size // tp), tp=tp)
    ranges = partition(parameter_counts(made.model.pipeline_layers()), mesh.pp)
    cls = Hybrid if tp > 1 else Pipeline
    return cls(made.model, lambda p: Adam(p, lr=1e-2), made, mesh,
               schedule=schedules.build("1f1b", mesh.pp, 2, 1), ranges=ranges)


LAYOUTS = {"zero3": zero3,
           "pipeline": lambda comm, made: staged(comm, made, 1),
           "hybrid": lambda comm, made: staged(comm, made, 2)}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_deferred_model_trains_as_the_eager_one(comm, layout):
    if comm.size % 2:
        pytest.skip("the pipeline and the hybrid need an even world")
    batches = [on_device(np.random.default_rng(s).integers(1, 16, (8, 9))) for s in range(2)]
    states = []
    for deferring in (False, True):
        strategy = LAYOUTS[layout](comm, task(deferring))
        for batch in batches:
            strategy.step(batch)
        states.append(strategy.state_dict())
        strategy.close()
        if layout != "zero3":
            strategy.mesh.free()
    if comm.rank == 0:
        eager, lazy = states
        assert eager["model"].keys() == lazy["model"].keys()
        for name, array in eager["model"].items():
            np.testing.assert_array_equal(host(lazy["model"][name]), host(array), err_msg=name)


def test_ranks_that_built_different_models_are_refused(comm):
    if comm.size < 2:
        pytest.skip("needs two ranks to disagree")
    made = task(True, seed=3 + (comm.rank == comm.size - 1))
    with pytest.raises(ValueError, match="built their unfilled models differently"):
        zero3(comm, made)
