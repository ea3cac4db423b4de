"""Every strategy takes its objective one way: an object with loss(model, batch, reduction) and
count(batch). One that lacks a method, or whose loss cannot be asked for a sum, is refused in
words before any message; every form that takes reduction= trains."""

import numpy as np
import pytest

from scratchpar import nn
from scratchpar.autograd import functional as F
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.optim import SGD
from scratchpar.parallel import DataParallel, DataParallelNaive, LocalSGD, SingleDevice, ZeRO1
from scratchpar.parallel.pipeline import Pipeline, partition, schedules
from scratchpar.parallel.pipeline.partition import parameter_counts
from scratchpar.train.task import Task

WORLD = Communicator(name="world")


class Pair:
    """A user's objective: the two functions a strategy calls."""

    def __init__(self, loss):
        self.loss = loss

    def count(self, batch):
        return len(batch[1])


def built(cls, objective, **knobs):
    model = nn.MLP([3, 4, 2], np.random.default_rng(0), np.float64)
    mesh = Mesh(WORLD)
    try:
        return cls(model, lambda params: SGD(params, 0.1), objective, mesh, **knobs)
    finally:
        mesh.free()


def no_reduction(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y)


STRATEGIES = [(DataParallel, {}), (DataParallelNaive, {}), (LocalSGD, {"every": 2}),
              (ZeRO1, {})]


@pytest.mark.parametrize("cls, knobs", STRATEGIES)
def test_a_loss_without_reduction_is_refused_in_words(cls, knobs):
    with pytest.raises(TypeError, match=r"the objective's loss must take reduction= \('sum' or "
                                        r"'mean'\): each rank sums"):
        built(cls, Pair(no_reduction), **knobs)


@pytest.mark.parametrize("cls, knobs", STRATEGIES)
def test_an_objective_without_count_is_refused_with_an_example(cls, knobs):
    class LossOnly:
        def loss(self, model, batch, reduction):
            return F.cross_entropy(model(batch[0]), batch[1], reduction=reduction)

    with pytest.raises(TypeError, match=r"the objective LossOnly has no count: a strategy calls "
                                        r"loss\(model, batch, reduction\) and count\(batch\)\. "
                                        r"For example:\nclass Objective:"):
        built(cls, LossOnly(), **knobs)


@pytest.mark.parametrize("loss", [
    lambda model, batch, reduction="mean": F.cross_entropy(model(batch[0]), batch[1],
                                                           reduction=reduction),
    lambda model, batch, **kw: F.cross_entropy(model(batch[0]), batch[1], **kw),
    lambda *args, **kw: F.cross_entropy(args[0](args[1][0]), args[1][1], **kw)])
def test_every_loss_that_takes_reduction_trains_as_one_device(loss):
    batch = (np.random.default_rng(1).standard_normal((4, 3)), np.array([0, 1, 1, 0]))
    dp = built(DataParallel, Pair(loss))
    model = nn.MLP([3, 4, 2], np.random.default_rng(0), np.float64)
    one = SingleDevice(model, lambda params: SGD(params, 0.1), Pair(loss))
    got, want = dp.step(batch), one.step(batch)
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-14)
    for p, q in zip(dp.model.parameters(), model.parameters()):
        np.testing.assert_allclose(p.data, q.data, rtol=1e-14)


def test_a_task_refuses_a_criterion_without_reduction_before_any_strategy():
    def mean_only(out, y):
        return F.cross_entropy(out, y)

    model = nn.MLP([3, 4, 2], np.random.default_rng(0), np.float64)
    with pytest.raises(TypeError, match="the task's criterion 'mean_only' must take reduction="):
        Task(None, model, "sample", mean_only)


def test_a_pipeline_refuses_an_objective_that_cannot_split_a_batch():
    model = nn.MLP([3, 4, 2], np.random.default_rng(0), np.float64)
    mesh = Mesh(WORLD, pp=1)
    try:
        with pytest.raises(TypeError, match=r"has no split or output_loss: .* and a pipeline "
                                            r"split\(batch\)"):
            Pipeline(model, lambda params: SGD(params, 0.1), Pair(no_reduction), mesh,
                     schedule=schedules.build("gpipe", 1, 2),
                     ranges=partition(parameter_counts(model.pipeline_layers()), 1))
    finally:
        mesh.free()
