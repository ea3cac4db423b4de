# mpiexec -n 4 python mpi_examples/05_data_parallel.py
"""Data parallelism on real ranks: the same gradient, loss and parameters as one device.

Every rank holds a replica of a small MLP and the rows of the global batch that
``data/shard.py`` gives it (10 rows do not divide by 4: ranks get 3, 3, 2, 2). Each rank
backpropagates its *summed* loss Lᵣ, the gradients are summed over ranks and divided by the global
sample count N, so the result is the mean gradient of the whole batch, which one device also
computes. Every rank also runs that one-device model itself, as the oracle.
"""

import hashlib

import numpy as np

from scratchpar import nn
from scratchpar.autograd import functional as F
from scratchpar.autograd import no_grad
from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.chunks import bounds
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.data.shard import shard
from scratchpar.optim import SGD
from scratchpar.parallel import DataParallel, SingleDevice

ROWS, SIZES, BUCKET_BYTES = 10, [5, 8, 3], 256


class Classify:
    """The objective: a batch's loss, and the units it sums over."""

    def loss(self, model, batch, reduction):  # every strategy asks for "sum"
        x, y = batch
        return F.cross_entropy(model(x), y, reduction=reduction)

    def count(self, batch):
        return len(batch[1])  # units of the loss: samples


def momentum_sgd(params):
    """The optimizer every strategy here makes over the parameters it steps."""
    return SGD(params, lr=0.3, momentum=0.5)


def make_batch(step):
    """Global batch ``step``, the same on every rank: x (ROWS, 5) float64, y (ROWS,) classes.

    The class is the largest of x's first three features, a rule the MLP can learn."""
    x = np.random.default_rng([7, step]).standard_normal((ROWS, SIZES[0]))  # (ROWS, 5)
    return x, x[:, :SIZES[-1]].argmax(axis=1)  # (ROWS,)


def max_rel_diff(got, want):
    """max over parameters of max|got − want| / max|want|."""
    return max(float(np.abs(g - w).max() / np.abs(w).max()) for g, w in zip(got, want))


def digest(model):
    """SHA-256 of every parameter's bytes: equal digests mean bitwise-identical replicas."""
    return hashlib.sha256(b"".join(p.data.tobytes() for p in model.parameters())).hexdigest()


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    p, say = comm.size, comm.rank == 0

    mesh, objective = Mesh(comm), Classify()  # pure data parallelism: every rank a replica
    # A different initialization on each rank: DataParallel broadcasts rank 0's to every replica.
    mine = nn.MLP(SIZES, np.random.default_rng([3, comm.rank]), np.float64)
    dp = DataParallel(mine, momentum_sgd, objective, mesh, bucket_bytes=BUCKET_BYTES)
    one = nn.MLP(SIZES, np.random.default_rng([3, 0]), np.float64)  # rank 0's start
    single = SingleDevice(one, momentum_sgd, objective)
    if say:
        print(f"{len(dp.params)} parameter arrays in {len(dp.plan)} buckets of at most "
              f"{BUCKET_BYTES} bytes; a global batch of {ROWS} samples over {p} rank(s)")

    batch = make_batch(0)
    with no_grad():  # this rank's summed loss Lᵣ over its nᵣ samples, before the step
        part = shard(batch, comm.rank, p)
        local = (objective.loss(mine, part, "sum").item(), objective.count(part))
    got, want = dp.step(batch), single.step(batch)
    rel = max_rel_diff([q.grad for q in mine.parameters()], [q.grad for q in one.parameters()])
    rows = comm.allgather_obj((local, rel))
    if say:
        print("\nstep 1: each rank's rows, its summed loss Lᵣ, and its gradient after the step's "
              "all-reduces\ncompared with the one-device gradient of the full batch")
        for r, (((loss_r, n_r), rel_r), (start, stop)) in enumerate(zip(rows, bounds(ROWS, p))):
            print(f"  rank {r}: rows {start}..{stop - 1} ({n_r} samples)  Lᵣ = {loss_r:9.6f}  "
                  f"max relative difference {rel_r:.1e}")
        sums, ns = [lr for (lr, _), _ in rows], [n for (_, n), _ in rows]
        means = [lr / n for lr, n in zip(sums, ns) if n]
        print(f"  Σ Lᵣ / N = {sum(sums):.6f} / {sum(ns)} = {got['loss']:.6f}   one device: "
              f"{want['loss']:.6f}")
        verdict = "right, the shards are equal" if len(set(ns)) == 1 else "wrong, shards differ"
        print(f"  mean of the per-rank means would be {sum(means) / len(means):.6f}: {verdict}")
        ok = all(rel_r < 1e-10 for _, rel_r in rows)
        print(f"  every rank's gradient equals the one-device gradient (rtol 1e-10): "
              f"{'yes' if ok else 'NO'}")

    print_steps(comm, dp, single, mine, one)
    dp.close()
    mesh.free()


def print_steps(comm, dp, single, mine, one):
    """Three more steps on new batches: losses, parameters and replicas compared."""
    if comm.rank == 0:
        print("\nsteps 2..4 (SGD, momentum 0.5): replicas compared by SHA-256 of their parameters")
    for step in range(1, 4):
        batch = make_batch(step)
        got, want = dp.step(batch), single.step(batch)
        rel = max_rel_diff([q.data for q in mine.parameters()], [q.data for q in one.parameters()])
        digests = comm.allgather_obj(digest(mine))
        if comm.rank == 0:
            same = "yes" if len(set(digests)) == 1 else "NO"
            print(f"  step {step + 1}: loss {got['loss']:.6f} (one device {want['loss']:.6f})  "
                  f"parameters vs one device {rel:.1e}  all replicas bitwise identical: {same}",
                  flush=True)


if __name__ == "__main__":
    main()
