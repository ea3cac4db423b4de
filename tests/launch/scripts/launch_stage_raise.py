"""A 1F1B pipeline over 3 ranks whose middle stage raises in its forward of micro-batch 2."""

import numpy as np

from scratchpar import nn
from scratchpar.autograd import Function
from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.optim import SGD
from scratchpar.parallel.pipeline import Pipeline, schedules
from scratchpar.train.task import Task

comm = Communicator(name="world")
abort_on_exception(comm)


class Faulty(Function):
    """The identity, until its fourth call: the shape probe (0 rows), F0, F1, then F2."""

    seen = 0

    @staticmethod
    def forward(ctx, x):
        Faulty.seen += 1
        if Faulty.seen == 4:
            raise FloatingPointError("a bad value in the middle stage")
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class FaultyLayer(nn.Module):
    def forward(self, x):
        return Faulty.apply(x)


model = nn.MLP([4, 8, 8, 3], np.random.default_rng(0), np.float64)
layers = model.pipeline_layers()
model.pipeline_layers = lambda: [layers[0], nn.Sequential(FaultyLayer(), layers[1]), layers[2]]
pipe = Pipeline(model, lambda params: SGD(params, lr=0.1), Task(None, model, "sample"),
                Mesh(comm, pp=3), schedule=schedules.build("1f1b", 3, 4),
                ranges=[range(0, 1), range(1, 2), range(2, 3)])
gen = np.random.default_rng(1)
pipe.step((gen.standard_normal((8, 4)), gen.integers(0, 3, 8)))
print(f"rank {comm.rank} finished, but should have been ended", flush=True)
