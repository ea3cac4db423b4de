# mpiexec -n 4 python mpi_examples/07_local_sgd.py
"""Local SGD: every rank steps alone on its own rows, and the replicas are averaged every 3 steps.

Synchronous data parallelism all-reduces the gradients at every step, so the replicas never
differ. Local SGD (Lin et al. 2020) lets rank r take steps on its own shard's mean gradient,
θᵣ ← θᵣ − η∇Lᵣ(θᵣ)/nᵣ, and every ``every`` steps replaces each replica by the average
θ ← (1/p) Σᵣ θᵣ: the model crosses the network once per ``every`` steps instead of every step.

Rank 0 prints, after each step, the spread of the replicas, max over r of ‖θᵣ − θ̄‖₂ (all
parameters flattened): it grows while the ranks follow their own shards and falls to exactly 0
at every averaging step, when the replicas become bitwise identical. The loss printed is that of
the whole global batch, each rank's rows scored by its own replica, before the step: it falls
while every replica fits its own rows and jumps after an averaging, since the average fits each
shard less well than that shard's own replica did (the shards here differ in their classes).
The same steps of synchronous ``DataParallel`` follow, with the all-reduces each one used.
"""

import numpy as np

from scratchpar import nn
from scratchpar.autograd import functional as F
from scratchpar.autograd import no_grad
from scratchpar.comm import collectives
from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.optim import SGD
from scratchpar.parallel import DataParallel, LocalSGD
from scratchpar.trace.tracer import Tracer

ROWS, SIZES, EVERY, STEPS, LR = 32, [5, 16, 3], 3, 9, 0.2
LOSS_BYTES = 24  # at most three float64 scalars


class Classify:
    """The objective: a batch's loss, and the units it sums over."""

    def loss(self, model, batch, reduction):  # the strategies ask for "sum"
        x, y = batch
        return F.cross_entropy(model(x), y, reduction=reduction)

    def count(self, batch):
        return len(batch[1])  # units of the loss: samples


def sgd(params):
    """Both strategies' optimizer, made over the parameters they step."""
    return SGD(params, lr=LR)


def make_batch(step):
    """Global batch ``step``, the same on every rank: x (ROWS, 5) float64, y (ROWS,) classes.

    The class is the largest of x's first three features. The rows are sorted by class, so the
    consecutive rows that each rank trains on hold mostly one or two classes: the shards differ,
    as when each rank reads its own files, and each replica is pulled towards its own classes."""
    x = np.random.default_rng([7, step]).standard_normal((ROWS, SIZES[0]))  # (ROWS, 5)
    y = x[:, :SIZES[-1]].argmax(axis=1)  # (ROWS,)
    by_class = np.argsort(y, kind="stable")  # (ROWS,)
    return x[by_class], y[by_class]


def spread(comm, model):
    """max over ranks of ‖θᵣ − θ̄‖₂, the parameters flattened (collective).

    Measured from rank 0's replica, θᵣ − θ̄ = dᵣ − mean(d) with dᵣ = θᵣ − θ₀: identical replicas
    give exactly 0 (p equal floats summed and divided by p need not round back to the same float).
    """
    flat = np.concatenate([p.data.reshape(-1) for p in model.parameters()])  # (P,)
    d = flat - collectives.broadcast_(comm, flat.copy())  # (P,) θᵣ − θ₀
    distance = float(np.linalg.norm(d - collectives.all_reduce(comm, d, "avg")))
    return max(comm.allgather_obj(distance))


def counted(comm, tracer, step, batch):
    """``step(batch)`` with this rank's collectives recorded (not those of :func:`spread`)."""
    comm.tracer = tracer
    try:
        return step(batch)
    finally:
        comm.tracer = None


def traffic(tracer):
    """(all-reduces, bytes) of the steps' parameters or gradients, and (all-reduces, bytes each)
    of the loss: Σ loss and Σ units (16 B; local SGD adds Σ‖gᵣ‖, the verdict on finiteness)."""
    model = [e.bytes for e in tracer.events if e.cat == "comm" and e.bytes > LOSS_BYTES]
    totals = [e.bytes for e in tracer.events if e.cat == "comm" and e.bytes <= LOSS_BYTES]
    return len(model), sum(model), len(totals), max(totals)


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    say = comm.rank == 0
    mesh, objective = Mesh(comm), Classify()  # pure data parallelism: every rank a replica
    model = nn.MLP(SIZES, np.random.default_rng(3), np.float64)
    local = LocalSGD(model, sgd, objective, mesh, every=EVERY)
    if say:
        print(f"local SGD on {comm.size} ranks: {ROWS // comm.size} rows each, "
              f"replicas averaged every {EVERY} steps")
    local_log = Tracer(comm.rank)
    for step in range(1, STEPS + 1):
        loss = counted(comm, local_log, local.step, make_batch(step))["loss"]
        s = spread(comm, model)
        if say:
            mark = "  ← averaged: replicas identical" if step % EVERY == 0 else ""
            print(f"  step {step}  loss {loss:.6f}  spread {s:.6f}{mark}", flush=True)

    twin = nn.MLP(SIZES, np.random.default_rng(3), np.float64)
    dp = DataParallel(twin, sgd, objective, mesh)
    dp_log = Tracer(comm.rank)
    for step in range(1, STEPS + 1):
        counted(comm, dp_log, dp.step, make_batch(step))
    with no_grad():
        held_out = make_batch(STEPS + 1)
        final = [objective.loss(m, held_out, "mean").item() for m in (model, twin)]
    for strategy in (local, dp):
        strategy.close()
    mesh.free()
    if say:
        print(f"\nafter {STEPS} steps, loss on a new batch of {ROWS}: local SGD {final[0]:.6f}, "
              f"synchronous DataParallel {final[1]:.6f}")
        used = {name: traffic(log) for name, log in (("local SGD", local_log),
                                                     ("DataParallel", dp_log))}
        for name, (n, nbytes, totals, each) in used.items():
            print(f"  {name:<12} {n:2d} parameter/gradient all-reduces, {nbytes:6d} bytes; "
                  f"{totals} of {each} bytes for the loss")
        ratio = used["local SGD"][1] / used["DataParallel"][1]
        print(f"  local SGD: the parameters (one bucket, like DP's gradients) only every {EVERY} "
              f"steps, {ratio:.3f} of the bytes", flush=True)


if __name__ == "__main__":
    main()
