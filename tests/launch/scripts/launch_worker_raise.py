"""A worker (rank 2) raises in its fourth step of Downpour (the server serves the others
asynchronously), of Hogwild (the others share its window), of asynchronous EASGD or of
round-robin EASGD (the master waits on it): ``python launch_worker_raise.py
downpour|hogwild|easgd-async|round-robin``, on 4 ranks."""

import sys
import time

import numpy as np

from scratchpar import nn
from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.optim import SGD
from scratchpar.parallel.easgd import AsyncEASGD, RoundRobinEASGD
from scratchpar.parallel.hogwild import Hogwild
from scratchpar.parallel.ps import AsyncParameterServer
from scratchpar.train.task import Task

comm = Communicator(name="world")
abort_on_exception(comm)
mesh = Mesh(comm)
task = Task(None, nn.MLP([4, 8, 3], np.random.default_rng(0), np.float64), "sample")


class Breaking:
    """The task's objective, whose loss raises on rank 2 at its fourth call."""

    calls = 0

    def loss(self, model, batch, reduction):
        self.calls += 1
        if comm.rank == 2 and self.calls == 4:
            print(f"rank 2 raises at {time.time():.3f}", file=sys.stderr, flush=True)
            raise ValueError("worker rank 2 breaks in step 4")
        return task.loss(model, batch, reduction)

    def count(self, batch):
        return task.count(batch)


args = (task.model, lambda params: SGD(params, 0.1), Breaking(), mesh)
strategy = {"downpour": lambda: AsyncParameterServer(*args),
            "hogwild": lambda: Hogwild(*args),
            "easgd-async": lambda: AsyncEASGD(*args, rho=1.0, tau=2),
            "round-robin": lambda: RoundRobinEASGD(*args, rho=1.0)}[sys.argv[1]]()
gen = np.random.default_rng(1)
for _ in range(50):
    strategy.step((gen.standard_normal((6, 4)), gen.integers(0, 3, 6)))
strategy.shutdown() if hasattr(strategy, "shutdown") else comm.barrier()  # waits for rank 2
print(f"rank {comm.rank} finished, but should have been ended", flush=True)
