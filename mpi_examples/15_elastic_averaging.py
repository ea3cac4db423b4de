# mpiexec -n 4 python mpi_examples/15_elastic_averaging.py
"""Elastic averaging SGD (Zhang, Choromanska & LeCun 2015) in its three modes.

Every worker trains its own copy xⁱ of a logistic regression (one Linear layer) on its rows, and
an elastic force of strength α = ηρ pulls each copy toward a centre x̃ and the centre toward the
copies (eqs. 3–4): xⁱ ← xⁱ − α (xⁱ − x̃), x̃ ← x̃ + α Σᵢ (xⁱ − x̃). The centre is the model that
is evaluated.

- Synchronous (``SyncEASGD``): 4 workers all-reduce their differences every τ = 2 steps. With
  ρ = 0 the copies are independent SGDs and drift apart; with ρ > 0 the force holds them near x̃.
- Asynchronous (``AsyncEASGD``): rank 0 is the master, holding x̃ on the host; each of 3 workers
  exchanges with it every τ of its own steps while the others go on. Rank 3 is slowed.
- Round-robin (``RoundRobinEASGD``; the scheme of Zhang et al.'s §4): the master hands step t's
  samples and x̃ to worker j = t mod 3 alone, which moves by eq. 3 while the master moves by eq. 4.
"""

import sys
import time

import numpy as np

from scratchpar import nn
from scratchpar.autograd import functional as F
from scratchpar.autograd import no_grad
from scratchpar.comm.abort import abort_on_exception, refuse
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.optim import SGD
from scratchpar.parallel.easgd import AsyncEASGD, RoundRobinEASGD, SyncEASGD

P, FEATURES, CLASSES, ROWS, STEPS, LR, SEED = 4, 8, 3, 24, 30, 0.5, 4
TEACHER = np.random.default_rng([SEED, 0]).standard_normal((FEATURES, CLASSES))  # (F, C)


def batch(step):
    """Global batch ``step``, the same on every rank: x (ROWS, F) and the teacher's classes."""
    x = np.random.default_rng([SEED, 1, step]).standard_normal((ROWS, FEATURES))  # (B, F)
    return x, (x @ TEACHER).argmax(axis=1)  # (B,)


class Classify:
    """The objective: a batch's loss, and the units it sums over. ``slow``: a rank that sleeps
    before each gradient."""

    def __init__(self, slow: bool = False):
        self.slow = slow

    def loss(self, model, rows, reduction):  # the strategies ask for "sum"
        if self.slow:
            time.sleep(0.01)
        x, y = rows
        return F.cross_entropy(model(x), y, reduction=reduction)

    def count(self, rows):
        return len(rows[1])  # units of the loss: samples


def held_out(params) -> float:
    """The loss of a model with these parameters on 2,000 fresh rows."""
    model = nn.MLP([FEATURES, CLASSES], np.random.default_rng(0), np.float64)
    for p, value in zip(model.parameters(), params):
        p.data[...] = value
    with no_grad():
        return float(Classify().loss(model, batch(10**6), "mean").data)


def fresh_model() -> nn.Module:
    """The logistic regression every mode starts from."""
    return nn.MLP([FEATURES, CLASSES], np.random.default_rng(SEED), np.float64)


def sgd(params):
    """Every worker's optimizer, made over the parameters it steps."""
    return SGD(params, LR)


def synchronous(mesh, rho: float) -> None:
    comm = mesh.world
    strategy = SyncEASGD(fresh_model(), sgd, Classify(), mesh, rho=rho, tau=2)
    spreads = []
    for step in range(STEPS):
        strategy.step(batch(step))
        mine = np.concatenate([p.data.ravel() - c.ravel() for p, c in
                               zip(strategy.params, strategy.centre)])
        spreads.append(max(comm.allgather_obj(float(np.linalg.norm(mine)))))  # max ‖xⁱ − x̃‖
    if comm.rank == 0:
        print(f"  ρ = {rho}: the farthest copy from x̃ after steps 10, 20, 30: "
              f"{spreads[9]:.3f}, {spreads[19]:.3f}, {spreads[29]:.3f}; centre's held-out loss "
              f"{held_out(strategy.centre):.4f}")


def asynchronous(mesh) -> None:
    comm = mesh.world
    straggler = Classify(slow=comm.rank == 3)  # rank 3 sleeps before each gradient
    strategy = AsyncEASGD(fresh_model(), sgd, straggler, mesh, rho=1 / 3, tau=2)
    start = time.perf_counter()
    for step in range(STEPS):
        strategy.step(batch(step))
    strategy.shutdown()
    seconds = comm.allgather_obj(time.perf_counter() - start)
    exchanges = comm.allgather_obj(strategy.exchanges)
    strategy.close()
    if comm.rank == 0:
        print(f"  the master answered {exchanges[0]} exchanges, the workers made "
              f"{'+'.join(map(str, exchanges[1:]))}; workers done after "
              f"{', '.join(f'{s:.2f}' for s in seconds[1:])} s (rank 3 slowed); centre's held-out "
              f"loss {held_out(strategy.centre):.4f}")


def round_robin(mesh) -> None:
    comm = mesh.world
    strategy = RoundRobinEASGD(fresh_model(), sgd, Classify(), mesh, rho=1.0)
    losses = [strategy.step(batch(step))["loss"] for step in range(STEPS)]
    strategy.close()
    if comm.rank == 0:
        print(f"  step 0 (worker 0): loss {losses[0]:.4f}; step 29 (worker 2): loss "
              f"{losses[29]:.4f}; centre's held-out loss {held_out(strategy.centre):.4f}")


def main() -> int:
    comm = Communicator(name="world")
    abort_on_exception(comm)
    if comm.size != P:
        refuse(comm, f"run on {P} ranks: mpiexec -n {P} python {sys.argv[0]}")
    mesh = Mesh(comm)  # pure data parallelism: every rank holds the whole model
    if comm.rank == 0:
        print(f"synchronous EASGD, {P} workers, τ = 2, η = {LR}, {STEPS} steps:")
    synchronous(mesh, 0.0)
    synchronous(mesh, 0.25)
    if comm.rank == 0:
        print(f"asynchronous EASGD, a master and {P - 1} workers, τ = 2, ρ = 1/3:")
    asynchronous(mesh)
    if comm.rank == 0:
        print(f"round-robin EASGD (Algorithm 1), a master and {P - 1} workers in turn, ρ = 1:")
    round_robin(mesh)
    mesh.free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
