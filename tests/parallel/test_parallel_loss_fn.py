"""A strategy that sums each rank's loss refuses, in words, a loss_fn it cannot ask for a sum,
before any message; every form that can take reduction= is accepted."""

import numpy as np
import pytest

from scratchpar import nn
from scratchpar.autograd import functional as F
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.optim import SGD
from scratchpar.parallel import DataParallel, DataParallelNaive, LocalSGD, ZeRO1
from scratchpar.parallel.pipeline import Pipeline, partition, schedules
from scratchpar.parallel.pipeline.partition import parameter_counts
from scratchpar.train.task import Task


def built(cls, loss_fn, **knobs):
    model = nn.MLP([3, 4, 2], np.random.default_rng(0), np.float64)
    return cls(model, SGD(model.parameters(), 0.1), loss_fn, lambda batch: len(batch[1]),
               Communicator(name="world"), **knobs)


def no_reduction(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y)


@pytest.mark.parametrize("cls, knobs", [(DataParallel, {}), (DataParallelNaive, {}),
                                        (LocalSGD, {"every": 2}), (ZeRO1, {})])
def test_a_loss_fn_without_reduction_is_refused_in_words(cls, knobs):
    with pytest.raises(TypeError, match="loss_fn 'no_reduction' must take reduction= "
                                        r"\('mean' or 'sum'\): each rank sums"):
        built(cls, no_reduction, **knobs)


@pytest.mark.parametrize("loss_fn", [
    lambda model, batch, reduction="mean": F.cross_entropy(model(batch[0]), batch[1],
                                                           reduction=reduction),
    lambda model, batch, **kw: F.cross_entropy(model(batch[0]), batch[1], **kw),
    lambda *args, **kw: F.cross_entropy(args[0](args[1][0]), args[1][1], **kw)])
def test_every_loss_fn_that_takes_reduction_trains(loss_fn):
    dp = built(DataParallel, loss_fn)
    x = np.random.default_rng(1).standard_normal((4, 3))
    assert np.isfinite(dp.step((x, np.array([0, 1, 1, 0])))["loss"])


def test_a_pipeline_refuses_a_criterion_without_reduction_before_any_message():
    def mean_only(out, y):
        return F.cross_entropy(out, y)

    model = nn.MLP([3, 4, 2], np.random.default_rng(0), np.float64)
    comm = Communicator(name="world")
    mesh = Mesh(comm, pp=1)
    with pytest.raises(TypeError, match="criterion 'mean_only' must take reduction= "):
        Pipeline(model, lambda params: SGD(params, 0.1), Task(None, model, "sample", mean_only),
                 mesh, schedules.build("gpipe", 1, 2),
                 partition(parameter_counts(model.pipeline_layers()), 1))
    mesh.free()
