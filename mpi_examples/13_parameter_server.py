# mpiexec -n 4 python mpi_examples/13_parameter_server.py
"""Parameter servers: the synchronous spec beside one device, then one worker at a time.

The model's parameters, laid end to end, are one flat vector of keys. Server s of S owns a
contiguous range of it, as ps-lite's servers do (Li et al. 2014, §3.1), and keeps it, with its
optimizer state, on the host; the other ranks are workers. A range may start or end inside a
parameter (``KeyRanges``).

Part 1, ``SyncParameterServer`` on 2 servers and 2 workers: each step, worker w sums its loss
over its n_w rows, divides the gradient by n_w as one device divides by its batch's, and pushes
to each server that mean gradient's keys in the server's range with [L_w, n_w]; the server
weighs the pushes by n_w/N, steps its range, and every worker pulls every range back (Dean et
al. 2012, §4.1). That is one device's step on the global batch: the losses and every parameter
match it.

Part 2, ``LockedParameterServer`` on 1 server and 3 workers: a worker takes the lock, whose grant
is the latest parameters, computes its gradient, and its push is applied and frees the lock for
the next worker in arrival order. Each worker records a digest of the parameters it computed
on; those digests chain, each grant being the previous one plus one worker's update. Following
the chain from the initial weights gives the order the lock went round, and serial SGD over the
workers' rows in that order reproduces the server's parameters bit for bit.
"""

import hashlib

import numpy as np

from scratchpar import nn
from scratchpar.autograd import functional as F
from scratchpar.comm.abort import abort_on_exception, refuse
from scratchpar.comm.chunks import bounds
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.data.shard import shard
from scratchpar.optim import SGD
from scratchpar.parallel import SingleDevice
from scratchpar.parallel.ps import LockedParameterServer, SyncParameterServer

P, SIZES, ROWS, LR, MOMENTUM, SEED = 4, [5, 7, 4], 11, 0.2, 0.9, 3
SYNC_STEPS, LOCKED_STEPS = 3, 4


def mlp():
    """The float64 model every rank builds alike from one seed."""
    return nn.MLP(SIZES, np.random.default_rng(SEED), np.float64)


def sgd(params):
    return SGD(params, LR, MOMENTUM)


class Classify:
    """The objective: a batch's cross-entropy, summed (every strategy divides by the units of
    the global batch), and its units, samples."""

    def loss(self, model, batch, reduction):
        x, y = batch
        return F.cross_entropy(model(x), y, reduction=reduction)

    def count(self, batch):
        return len(batch[1])


def batch(step):
    """Global batch ``step``, the same on every rank: x (ROWS, 5), y the largest of x's first
    four features."""
    x = np.random.default_rng([SEED, step]).standard_normal((ROWS, SIZES[0]))  # (B, 5)
    return x, x[:, :SIZES[-1]].argmax(axis=1)  # (B,)


def digest(model) -> str:
    return hashlib.sha256(b"".join(p.data.tobytes() for p in model.parameters())).hexdigest()


def key_ranges(ps, model) -> list[str]:
    """Which keys each server owns, named by parameter and element."""
    names = [name for name, _ in model.named_parameters()]
    lines = []
    for s, (first, last) in enumerate(ps.ranges.ranges):
        parts = [names[i] if stop - start == ps.ranges.sizes[i] else f"{names[i]}[{start}:{stop}]"
                 for i, start, stop, _ in ps.ranges.pieces[s]]
        lines.append(f"server {s} (rank {s}) owns keys {first}–{last - 1} of "
                     f"{sum(ps.ranges.sizes)}: {', '.join(parts)}")
    return lines


def synchronous(mesh, say):
    comm, model = mesh.world, mlp()
    ps = SyncParameterServer(model, sgd, Classify(), mesh, servers=2)
    one = mlp()
    single = SingleDevice(one, sgd, Classify())
    if say:
        rows = " and ".join(str(stop - start) for start, stop in bounds(ROWS, ps.workers))
        print(f"Part 1: synchronous, {ps.servers} servers and {ps.workers} workers, "
              f"{ROWS} rows per step ({rows} per worker), SGD with momentum", flush=True)
        print("\n".join(f"  {line}" for line in key_ranges(ps, model)), flush=True)
    for step in range(SYNC_STEPS):
        got, want = ps.step(batch(step)), single.step(batch(step))
        if say:
            print(f"  step {step}: loss {got['loss']:.12f}   one device {want['loss']:.12f}",
                  flush=True)
    state = ps.state_dict()  # collective over the servers: their ranges joined on rank 0
    theirs = dict(one.named_parameters())
    pulled = 0.0 if ps.is_server else max(  # a worker's copy: the parameters it pulled last
        float(np.abs(p.data - theirs[name].data).max()) for name, p in model.named_parameters())
    worst = max(comm.allgather_obj(pulled))
    if say:
        whole = one.state_dict()
        servers = max(float(np.abs(state["model"][k] - whole[k]).max()) for k in whole)
        same = sorted(state["model"]) == sorted(whole) and max(servers, worst) < 1e-12
        assert same, f"the synchronous server left one device: {max(servers, worst)}"
        print(f"  after {SYNC_STEPS} steps, max |θ − one device's θ|: servers' ranges joined "
              f"{servers:.1e}, workers' pulled copies {worst:.1e}")
        print(f"  every parameter equals one device's (to 1e-12): {'yes' if same else 'NO'}",
              flush=True)
    ps.close()


class Recording(Classify):
    """The objective, noting before each loss (worker rank − 1, its step, a digest of the
    parameters it computes on) in ``seen``."""

    def __init__(self, rank: int):
        self.rank, self.seen = rank, []

    def loss(self, model, batch, reduction):
        self.seen.append((digest(model), self.rank - 1, len(self.seen)))
        return super().loss(model, batch, reduction)


def locked(mesh, say):
    comm, model = mesh.world, mlp()
    recording = Recording(comm.rank)
    ps = LockedParameterServer(model, sgd, recording, mesh, servers=1)
    if say:
        print(f"\nPart 2: locked, 1 server and {ps.workers} workers, {LOCKED_STEPS} steps each: "
              "one worker at a time reads, computes and writes", flush=True)
    for step in range(LOCKED_STEPS):
        ps.step(batch(step))
    report = ps.shutdown()  # workers leave; server 0 reports the run
    state = ps.state_dict()
    grants = [entry for entries in comm.allgather_obj(recording.seen) for entry in entries]
    ps.close()
    if not say:
        return
    print(f"  {report['summary']}")
    by_digest = {d: (w, step) for d, w, step in grants}
    one = mlp()
    serial, order = SingleDevice(one, sgd, Classify()), []
    for _ in grants:  # follow the chain: the grant that holds exactly these parameters
        w, step = by_digest[digest(one)]
        order.append(f"{w + 1}·{step}")
        serial.step(shard(batch(step), w, ps.workers))
    print(f"  the lock went round (rank·step): {' '.join(order)}")
    same = all(np.array_equal(state["model"][k], v) for k, v in one.state_dict().items())
    assert same and report["staleness_histogram"] == {0: len(grants)}
    print(f"  serial SGD on those {len(grants)} worker batches, in that order, equals the "
          f"server's parameters bitwise: {'yes' if same else 'NO'}; every push staleness 0",
          flush=True)


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    say = comm.rank == 0
    if comm.size != P:
        refuse(comm, f"13_parameter_server.py runs 2 servers with 2 workers, then 1 with 3: "
                     f"mpiexec -n {P} python mpi_examples/13_parameter_server.py")
    mesh = Mesh(comm)  # pure data parallelism: a parameter server splits its ranks itself
    synchronous(mesh, say)
    locked(mesh, say)
    mesh.free()


if __name__ == "__main__":
    main()
