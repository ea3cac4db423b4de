# mpiexec -n 4 python mpi_examples/16_hogwild.py
"""Hogwild (Niu, Recht, Ré & Wright 2011): lock-free SGD on one parameter vector that every rank
of the node maps into its own memory (an MPI-3 shared-memory window).

- A racy counter. Every rank adds 1 to one shared integer, 20,000 times, with plain loads and
  stores: two ranks that read the same old value both write old + 1, and one increment is lost.
  Under the window's exclusive lock (``SharedArray.exclusive``) none is.
- Sparsity. A sample of sparse logistic regression reads and writes only the weights of its 8
  features and the bias, 9 of 785 coordinates. The paper's measures (§2) say how often two
  samples' coordinates meet: Ω, the most coordinates one sample touches; Δ, the largest share
  of samples that touch one coordinate; ρ, the largest share of samples that share a coordinate
  with one sample. Counted on 2,048 samples, Zipf-popular features (and the bias, in every
  sample) make this problem far from sparse by Δ and ρ, like the paper's RCV1; the ratings of
  matrix factorization, where a sample touches one user's row and one item's, are sparse.
- Training. Four workers run Hogwild (``Hogwild``) on 16 rows each of a 64-row batch per
  step, writing θ_v ← θ_v − γ g_v into the shared vector with no lock (Algorithm 1), with
  γ = η·16/64, a worker's share of the batch: the four writes add up to one device's step on
  the whole batch. One device's SGD on the same batches at the same η is the yardstick, and
  the locked variant (``LockedHogwild``), whose writes never race, runs beside it. Hogwild's
  losses and the lost increments change from run to run; the lock's counts, the measures and
  one device's loss do not.
"""

import sys
import time

import numpy as np

from scratchpar import nn
from scratchpar.autograd import functional as F
from scratchpar.comm.abort import abort_on_exception, refuse
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.comm.window import SharedArray
from scratchpar.data import LowRankRatings, SparseLogistic
from scratchpar.optim import SGD
from scratchpar.parallel import SingleDevice
from scratchpar.parallel.hogwild import Hogwild, LockedHogwild
from scratchpar.train.task import Task

P, FEATURES, NNZ, ROWS, STEPS, LR, SEED = 4, 784, 8, 16, 500, 8.0, 3
INCREMENTS, LOCKED_INCREMENTS = 20_000, 300


def counter(comm, lock: bool, n: int) -> None:
    """Every rank adds 1 to one shared integer n times; rank 0 reports how many landed."""
    shared = SharedArray(comm, 1, np.int64)
    start = time.perf_counter()
    for _ in range(n):
        if lock:
            with shared.exclusive() as count:
                count[0] += 1
        else:
            shared.array[0] += 1  # load, add, store: another rank may store in between
    shared.settle()  # every rank's stores done and visible: sync, barrier, sync
    landed, seconds = int(shared.array[0]), time.perf_counter() - start
    shared.free()
    if comm.rank == 0:
        sent = n * comm.size
        how = "under the window's exclusive lock" if lock else "with no lock"
        print(f"  {how}: {landed} of {sent} increments landed, {sent - landed} lost "
              f"({(sent - landed) / sent:.0%}), {seconds:.2f} s")


def measures(touches: np.ndarray) -> str:
    """Ω, Δ and ρ (Niu et al. 2011, §2) of the samples E whose coordinates are the rows of
    ``touches`` (|E|, n) bool: sample e touches coordinate v."""
    t = touches.astype(np.float64)  # (|E|, n)
    omega = int(t.sum(axis=1).max())  # max over e of |e|
    delta = t.mean(axis=0).max()  # max over v of |{e : v ∈ e}| / |E|
    rho = ((t @ t.T) > 0).mean(axis=1)  # (|E|,) |{ê : ê ∩ e ≠ ∅}| / |E|
    return (f"Ω = {omega:2d}   Δ = {delta:.3f}   ρ = {rho.max():.3f} (the mean sample meets "
            f"{rho.mean():.3f} of the others)")


def sparsity() -> None:
    """The measures on 2,048 samples of each sparse problem."""
    idx, _, _ = SparseLogistic(FEATURES, NNZ, SEED).batch(10**6, 2048)  # (M, nnz)
    touches = np.zeros((len(idx), FEATURES + 1), bool)  # (M, D + 1) the weights, then the bias
    np.put_along_axis(touches, idx, True, axis=1)
    touches[:, FEATURES] = True  # every sample touches the bias
    print(f"  logistic regression, features alone  {measures(touches[:, :FEATURES])}")
    print(f"  logistic regression, with the bias   {measures(touches)}")
    ratings = LowRankRatings(seed=SEED)  # 200 users × 200 items, rank 4
    user, item, _ = ratings.batch(10**6, 2048)  # (M,), (M,)
    rows = np.zeros((len(user), ratings.n_users + ratings.n_items), bool)  # (M, U + I)
    rows[np.arange(len(user)), user] = rows[np.arange(len(user)), ratings.n_users + item] = True
    touches = np.repeat(rows, ratings.rank, axis=1)  # (M, (U + I)·r) a row's r coordinates
    print(f"  matrix factorization, 200 × 200, r 4 {measures(touches)}")


def task() -> Task:
    data = SparseLogistic(FEATURES, NNZ, SEED)
    model = nn.SparseLogisticRegression(FEATURES, np.random.default_rng(SEED), np.float64)
    return Task(data, model, "sample", F.binary_cross_entropy_with_logits)


def sgd(params):
    """Plain SGD at η, made over the parameters it steps: Hogwild's write is its step."""
    return SGD(params, LR)


def train(mesh, lock: bool) -> float:
    """Hogwild (or its locked variant) on every rank: the held-out loss of the shared θ."""
    comm, mine = mesh.world, task()
    hogwild = (LockedHogwild if lock else Hogwild)(mine.model, sgd, mine, mesh)
    start = time.perf_counter()
    for step in range(STEPS):
        hogwild.step(mine.batch(step, ROWS * comm.size)[0])  # this rank takes its 16 rows
    hogwild.gather_model()  # every rank's model takes θ
    seconds = max(comm.allgather_obj(time.perf_counter() - start))
    hogwild.close()
    loss = mine.evaluate(8, 256)
    if comm.rank == 0:
        name = "locked (every write under the lock)" if lock else "Hogwild (no lock)"
        print(f"  {name:36s} held-out loss {loss:.4f}   {seconds:.2f} s")
    return loss


def one_device() -> float:
    """One device's SGD on the same 64-row batches at the same η."""
    one = task()
    single = SingleDevice(one.model, sgd, one)
    for step in range(STEPS):
        single.step(one.batch(step, ROWS * P)[0])
    return one.evaluate(8, 256)


def main() -> int:
    comm = Communicator(name="world")
    abort_on_exception(comm)
    if comm.size != P:
        refuse(comm, f"run on {P} ranks: mpiexec -n {P} python {sys.argv[0]}")
    if comm.rank == 0:
        print(f"a racy counter: {P} ranks add 1 to one shared integer:")
    counter(comm, False, INCREMENTS)
    counter(comm, True, LOCKED_INCREMENTS)
    if comm.rank == 0:
        print(f"how sparse? logistic regression on {FEATURES} Zipf-popular features, {NNZ} per "
              f"sample, and rank-4 ratings; 2,048 samples each:")
        sparsity()
        print(f"{P} workers × {ROWS} rows × {STEPS} steps, plain SGD at η = {LR}:")
    mesh = Mesh(comm)  # pure data parallelism: every rank a worker on the whole θ
    train(mesh, lock=False)
    train(mesh, lock=True)
    mesh.free()
    if comm.rank == 0:
        data = SparseLogistic(FEATURES, NNZ, SEED)
        print(f"  {'one device on the same batches':36s} held-out loss {one_device():.4f}")
        print(f"  {'the floor (the Bayes risk)':36s} {data.bayes_risk():.4f} "
              f"± {data.floor_stderr:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
