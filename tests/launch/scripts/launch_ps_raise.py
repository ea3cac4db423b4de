"""A parameter-server worker (rank 2) raises in its fourth step while the server serves the
others asynchronously (run on 4 ranks: a server and three workers)."""

import sys
import time

import numpy as np

from scratchpar import nn
from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.mpi import Communicator
from scratchpar.optim import SGD
from scratchpar.parallel.ps import AsyncParameterServer
from scratchpar.train.task import Task

comm = Communicator(name="world")
abort_on_exception(comm)
task = Task(None, nn.MLP([4, 8, 3], np.random.default_rng(0), np.float64), "sample")
steps = 0


def loss(model, batch, *args):
    global steps
    steps += 1
    if comm.rank == 2 and steps == 4:
        print(f"rank 2 raises at {time.time():.3f}", file=sys.stderr, flush=True)
        raise ValueError("worker rank 2 breaks in step 4")
    return task.loss(model, batch, *args)


ps = AsyncParameterServer(task.model, lambda params: SGD(params, 0.1), loss, task.count, comm)
gen = np.random.default_rng(1)
for _ in range(50):
    ps.step((gen.standard_normal((6, 4)), gen.integers(0, 3, 6)))
ps.shutdown()  # the server waits here for rank 2's leave, which never comes
print(f"rank {comm.rank} finished, but should have been ended", flush=True)
