# mpiexec -n 4 python mpi_examples/14_async_parameter_servers.py
"""Asynchronous parameter servers: Downpour, bounded staleness (SSP), and sync-then-async.

One server (rank 0) and three workers train a logistic regression (one Linear layer, a convex
problem) on rows labelled by a fixed teacher. Worker rank 3 is slowed: it sleeps before every
gradient, as a straggler would. Each mode runs the same 30 steps per worker, then the workers
leave (``shutdown``), each telling every server how many pushes it sent, and server 0 prints
its report: pushes applied, updates, the staleness of each update (updates between the version
a gradient was computed on and the version it was applied to) and the server's busy fraction.

- Downpour (``AsyncParameterServer``, Dean et al. 2012, §4.1): each push is one update the
  moment it arrives; nobody waits. With n_push = 4 a worker sums 4 steps' gradients per push
  (the last 2 steps go with its LEAVE), and with n_fetch = 2 it pulls every other step.
- SSP (``SSPParameterServer``, Ho et al. 2013): a clock's pushes become one update once every
  worker has pushed it, and a worker may start clock c + 1 only when the slowest has finished
  c + 1 − τ. So no update is more than τ stale, and the fast workers wait for the straggler.
- Sync-then-async (``SyncThenAsync``, DistBelief's warm start): the first 10 steps are
  synchronous (one update per clock, staleness 0), the rest Downpour.
"""

import time

import numpy as np

from scratchpar import nn
from scratchpar.autograd import functional as F
from scratchpar.autograd import no_grad
from scratchpar.comm.abort import abort_on_exception, refuse
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.optim import SGD
from scratchpar.parallel.ps import AsyncParameterServer, SSPParameterServer, SyncThenAsync

P, FEATURES, CLASSES, ROWS, STEPS, LR, SEED = 4, 8, 3, 24, 30, 0.5, 4
SLOW, TAU, WARMUP = 0.01, 1, 10  # the straggler's sleep per step (s), SSP's τ, sync steps
TEACHER = np.random.default_rng([SEED, 0]).standard_normal((FEATURES, CLASSES))  # (F, C)


def batch(step):
    """Global batch ``step``, the same on every rank: x (ROWS, F) and the teacher's classes."""
    x = np.random.default_rng([SEED, 1, step]).standard_normal((ROWS, FEATURES))  # (B, F)
    return x, (x @ TEACHER).argmax(axis=1)  # (B,)


class Classify:
    """The objective: the rows' cross-entropy, summed (the strategy divides by their units),
    and their units, samples; with ``slow``, a straggler's, which sleeps before each loss."""

    def __init__(self, slow: bool = False):
        self.slow = slow

    def loss(self, model, rows, reduction):
        if self.slow:
            time.sleep(SLOW)
        x, y = rows
        return F.cross_entropy(model(x), y, reduction=reduction)

    def count(self, rows):
        return len(rows[1])


def run(mesh, name, build, say):
    """Train with ``build(model, make_optimizer, objective, mesh)``; rank 0 prints the servers'
    report, the workers' waits and the held-out loss before and after, and returns the report."""
    comm = mesh.world
    model = nn.MLP([FEATURES, CLASSES], np.random.default_rng(SEED), np.float64)
    ps = build(model, lambda params: SGD(params, LR), Classify(comm.rank == comm.size - 1), mesh)
    held_out = batch(STEPS)
    with no_grad():
        start = Classify().loss(model, held_out, "mean").item()
    waited = sum(ps.step(batch(step)).get("wait_s", 0.0) for step in range(STEPS))
    report = ps.shutdown()  # the workers leave; the servers check that no update was lost
    waits = comm.allgather_obj(waited)[1:]
    ps.gather_model()  # rank 0 (server 0) takes the servers' parameters
    ps.close()
    if not say:
        return None
    with no_grad():
        end = Classify().loss(model, held_out, "mean").item()
    stale = " ".join(f"{k}:{n}" for k, n in report["staleness_histogram"].items())
    print(f"\n{name}\n  {report['summary']}\n  staleness (updates: count) {stale}\n"
          f"  waiting for pulls: {', '.join(f'rank {r} {w:.2f} s' for r, w in enumerate(waits, 1))}"
          f" (slowed); held-out loss {start:.3f} → {end:.3f}",
          flush=True)
    assert end < start / 2, f"{name} did not learn: {start} → {end}"
    return report


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    say = comm.rank == 0
    if comm.size != P:
        refuse(comm, f"14_async_parameter_servers.py runs 1 server and 3 workers: "
                     f"mpiexec -n {P} python mpi_examples/14_async_parameter_servers.py")
    w = comm.size - 1
    if say:
        print(f"logistic regression, {FEATURES} features → {CLASSES} classes; 1 server, {w} "
              f"workers of {ROWS // w} rows, {STEPS} steps each; rank 3 sleeps {SLOW} s a step",
              flush=True)
    mesh = Mesh(comm)  # pure data parallelism: a parameter server splits its ranks itself
    downpour = run(mesh, "Downpour, n_push 1, n_fetch 1", AsyncParameterServer, say)
    batched = run(mesh, "Downpour, n_push 4, n_fetch 2",
                  lambda *a: AsyncParameterServer(*a, n_push=4, n_fetch=2), say)
    ssp = run(mesh, f"SSP, τ = {TAU}", lambda *a: SSPParameterServer(*a, staleness=TAU), say)
    warm = run(mesh, f"synchronous for {WARMUP} steps, then Downpour",
               lambda *a: SyncThenAsync(*a, warmup=WARMUP), say)
    mesh.free()
    if not say:
        return
    pushes = -(-STEPS // 4)  # 7 pushes of 4 steps, and the last 2 steps with the LEAVE
    assert (downpour["pushes"], downpour["version"]) == (w * STEPS, w * STEPS)
    assert (batched["pushes"], batched["version"]) == (w * pushes, w * pushes)
    assert (ssp["pushes"], ssp["version"]) == (w * STEPS, STEPS)
    assert warm["version"] == WARMUP + w * (STEPS - WARMUP)
    bounded = max(ssp["staleness_histogram"]) <= TAU
    assert bounded
    print(f"\nupdates: Downpour one per push ({w} × {STEPS}); n_push 4: {w} × ⌈{STEPS}/4⌉ = "
          f"{w * pushes}; SSP one per clock ({STEPS}); warm start {WARMUP} + {w} × "
          f"{STEPS - WARMUP} = {warm['version']}")
    print(f"SSP: staleness ≤ τ = {TAU}: {'yes' if bounded else 'NO'}; Downpour, unbounded, "
          f"reached {max(downpour['staleness_histogram'])} updates", flush=True)


if __name__ == "__main__":
    main()
