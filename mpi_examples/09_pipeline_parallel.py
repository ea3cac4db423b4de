# mpiexec -n 4 python mpi_examples/09_pipeline_parallel.py
"""Pipeline parallelism: a 4-layer MLP with one layer per rank, first by hand, then pipelined.

1. Naive model distribution (Huang et al. 2019, GPipe, Fig. 2b), written with the send/recv
duals of ``scratchpar.parallel.duals``. Rank r holds layer r only. Forward: rank 0 runs layer 0
on the whole batch and ``send``s the activation to rank 1, which ``recv``s it, runs layer 1 and
sends on; rank 3 computes the loss. Backward retraces the messages: ``recv``'s backward sends
∂L/∂h back to the rank the activation came from, and ``send``'s backward receives it there and
carries on through that rank's layer. The gradients are exactly one device's (the same
arithmetic, only spread over ranks), but the work is strictly sequential: while one rank
computes the other three wait, so each rank idles (p − 1)/p of the time.

2. The ``Pipeline`` strategy, the same layers on a Mesh with pp = 4: the batch splits into m = 8
micro-batches, and rank s can forward micro-batch i + 1 while rank s + 1 forwards i. GPipe runs
every forward, then every backward; 1F1B (Narayanan et al. 2021, §2.1) alternates them as soon
as it can. Both idle (p−1)/(m+p−1) of the time (GPipe, §2.3), and both give one device's
gradient: each micro-batch's summed loss is backpropagated and the gradients accumulate, then
are divided by the batch's sample count once. What differs is memory: ``runtime.peak``, the
micro-batches whose activations a rank holds at once, is m under GPipe and p − s under 1F1B.

The layers here take microseconds, so a ``Work`` after each one stands in for a big layer's
compute: it sleeps 2.5 ms per row in forward and 5 ms per row in backward (backward ≈ 2 ×
forward) and logs when it ran. Printed times vary from run to run (with more ranks than cores a
rank may wake late, leaving a gap in a measured grid); the order of events does not.
"""

import time

import numpy as np

from scratchpar import nn
from scratchpar.autograd import Function, Tensor
from scratchpar.autograd import functional as F
from scratchpar.comm.abort import abort_on_exception, refuse
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.nn.module import Module
from scratchpar.optim import SGD
from scratchpar.parallel import SingleDevice, duals
from scratchpar.parallel.pipeline import Pipeline, partition, schedules
from scratchpar.parallel.pipeline.partition import parameter_counts
from scratchpar.train.task import Task

P, M, ROWS, SIZES, LR, SEED = 4, 8, 32, [5, 16, 16, 16, 4], 0.1, 3
FORWARD_S, BACKWARD_S = 2.5e-3, 5e-3  # Work's seconds per row
EVENTS: list = []  # this rank's Work: (kind, start, end) in time.perf_counter seconds


class Work(Function):
    """Identity that stands for a layer's compute: sleeps in forward and in backward, in
    proportion to the rows, and logs both in EVENTS. The runtime's probe of the activations'
    shapes (a forward on 0 rows, under no_grad) is no work and is not logged."""

    @staticmethod
    def forward(ctx, x):
        ctx.rows = len(x)
        if ctx.rows:
            EVENTS.append(("forward", *slept(FORWARD_S * ctx.rows)))
        return x

    @staticmethod
    def backward(ctx, g):
        EVENTS.append(("backward", *slept(BACKWARD_S * ctx.rows)))
        return g


def slept(seconds):
    start = time.perf_counter()
    time.sleep(seconds)
    return start, time.perf_counter()


class Timed(Module):
    """``layer`` followed by a Work."""

    def __init__(self, layer):
        self.layer = layer

    def forward(self, x):
        return Work.apply(self.layer(x))  # (B, D) unchanged


class TimedMLP(nn.MLP):
    """The MLP whose pipeline layers each end in a Work (its own forward, one device's, not)."""

    def pipeline_layers(self):
        return [Timed(layer) for layer in super().pipeline_layers()]


def make_batch():
    gen = np.random.default_rng(7)
    return gen.standard_normal((ROWS, SIZES[0])), gen.integers(0, SIZES[-1], ROWS)  # (B, 5), (B,)


def show(comm, line):
    """Rank 0 prints every rank's line, in rank order (``None``: this rank has nothing)."""
    lines = comm.allgather_obj(line)
    if comm.rank == 0:
        print("\n".join(f"  {text}" for text in lines if text is not None), flush=True)


def timeline(comm, t0, labels=None):
    """Every rank's Work since ``t0`` (its clock at a shared barrier): (rank, label, start ms,
    end ms), sorted by start, on every rank. ``labels`` name this rank's events in order (its
    computes, F3 or B3); by default they are named forward or backward."""
    labels = labels or [kind for kind, _, _ in EVENTS]
    mine = [(comm.rank, label, (s - t0) * 1e3, (e - t0) * 1e3)
            for label, (_, s, e) in zip(labels, EVENTS, strict=True)]
    return sorted((e for part in comm.allgather_obj(mine) for e in part), key=lambda e: e[2])


def grid(events, unit):
    """08's grid, measured: a row per rank, a column per ``unit`` ms, each cell the compute
    running then (· idle). Cells are rounded to the nearest column."""
    columns = round(max(e[3] for e in events) / unit)
    rows = [["·"] * columns for _ in range(P)]
    for q, label, start, end in events:
        for c in range(round(start / unit), min(round(end / unit), columns)):
            rows[q][c] = label
    return "\n".join(f"  rank {q} │ " + " ".join(f"{c:<2}" for c in row).rstrip()
                     for q, row in enumerate(rows))


def idle(events):
    """(makespan ms, 1 − Σ busy / (p · makespan)): the fraction of the ranks' time spent waiting."""
    makespan = max(e[3] for e in events)
    return makespan, 1 - sum(e[3] - e[2] for e in events) / (P * makespan)


def by_hand(comm, batch, twin):
    """Rank r runs layer r on the whole batch, one micro-batch; returns the makespan in ms."""
    r, last = comm.rank, comm.size - 1
    x, y = batch
    layer = TimedMLP(SIZES, np.random.default_rng(SEED), np.float64).pipeline_layers()[r]
    EVENTS.clear()
    comm.barrier()
    t0 = time.perf_counter()
    if r == 0:
        h = Tensor(x)  # (B, 5)
    else:  # its backward sends ∂L/∂h to rank r − 1
        h = duals.recv((ROWS, SIZES[r]), x.dtype, comm, source=r - 1)  # (B, D_r)
    out = layer(h)  # (B, D_{r+1})
    if r < last:
        token = duals.send(out, comm, dest=r + 1)  # a 0 standing for the loss on rank 3
        token.backward()  # waits for ∂L/∂out from rank r + 1, then backprops through layer r
        loss = None
    else:
        loss = F.cross_entropy(out, y)  # the batch's mean, as on one device
        loss.backward()
    events = timeline(comm, t0)

    one = F.cross_entropy(twin(Tensor(x)), y)  # one device: the whole model, the same batch
    one.backward()
    pairs = zip(layer.parameters(), twin.pipeline_layers()[r].parameters())
    diff = max(float(np.abs(p.grad - q.grad).max()) for p, q in pairs)
    linear = layer.layer if r == last else layer.layer[0]
    kind = f"Linear {linear.weight.shape[0]}→{linear.weight.shape[1]}" + " + ReLU" * (r < last)
    show(comm, f"rank {r} holds layer {r} ({kind}): max |∂L/∂θ − one device's| {diff:.1e}"
         + (f"; loss {loss.item():.6f}, one device {one.item():.6f}" if loss is not None else ""))

    if r == 0:
        print(f"\n  Work in ms since a shared barrier (forward {FORWARD_S * ROWS * 1e3:.0f}, "
              f"backward {BACKWARD_S * ROWS * 1e3:.0f} per layer):")
        print(f"  {'ms':>15}    " + "".join(f"rank {q:<6}" for q in range(P)).rstrip())
        for q, what, start, end in events:
            cells = ["·"] * P
            cells[q] = what
            print(f"  {start:6.0f} – {end:6.0f}    " + "".join(f"{c:<11}" for c in cells).rstrip())
        makespan, waiting = idle(events)
        print(f"  makespan {makespan:.0f} ms; the ranks idle {waiting:.1%} of it, "
              f"(p − 1)/p = {(P - 1) / P:.0%}: one rank works, three wait", flush=True)
    return idle(events)[0]  # the same on every rank: timeline gathers every rank's events


def pipelined(comm, label, batch, naive_ms):
    """One step of the Pipeline strategy with schedule ``label`` beside one device's step."""
    r = comm.rank
    model = TimedMLP(SIZES, np.random.default_rng(SEED), np.float64)
    twin = nn.MLP(SIZES, np.random.default_rng(SEED), np.float64)
    mesh = Mesh(comm, pp=P)
    ranges = partition(parameter_counts(model.pipeline_layers()), P)  # one layer per rank here
    pipe = Pipeline(model, lambda params: SGD(params, lr=LR), Task(None, model, "sample"), mesh,
                    schedule=schedules.build(label.lower(), P, M), ranges=ranges)
    single = SingleDevice(twin, lambda params: SGD(params, lr=LR), Task(None, twin, "sample"))
    if r == 0:
        print(f"\n{label}: m = {M} micro-batches of {ROWS // M} rows, schedules.build"
              f"({label.lower()!r}, {P}, {M}) on a Mesh with pp = {P}", flush=True)
    EVENTS.clear()
    comm.barrier()
    t0 = time.perf_counter()
    metrics = pipe.step(batch)
    events = timeline(comm, t0, [str(a) for a in pipe.actions if a.kind in ("F", "B")])
    reference = single.step(batch)

    theirs = twin.parameters()
    diff = max(float(np.abs(p.grad - theirs[i].grad).max())
               for p, i in zip(pipe.params, pipe.stage.index))
    expected = f"m = {M}" if label == "GPipe" else f"p − s = {P - r}"
    show(comm, f"rank {r}: layer {ranges[r][0]} ({', '.join(pipe.stage.names)})  runtime.peak "
               f"{pipe.runtime.peak} ({expected})  max |grad − one device's| {diff:.1e}")
    worst = max(comm.allgather_obj(diff))
    if r == 0:
        makespan, waiting = idle(events)
        print(f"  loss {metrics['loss']:.6f} (one device {reference['loss']:.6f}); "
              f"every rank's gradient equals one device's to 1e-12: "
              f"{'yes' if worst < 1e-12 else 'NO'}")
        unit = FORWARD_S * ROWS / M * 1e3
        print(f"  measured, one column per {unit:.0f} ms (a micro-batch's forward):\n"
              f"{grid(events, unit)}")
        print(f"  makespan {makespan:.0f} ms, naive {naive_ms:.0f} ms: {naive_ms / makespan:.1f}× "
              f"faster (at best p·m/(m+p−1) = {P * M / (M + P - 1):.1f}×);\n  the ranks idle "
              f"{waiting:.1%} of it, (p−1)/(m+p−1) = {(P - 1) / (M + P - 1):.1%}", flush=True)
    pipe.close()
    mesh.free()


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    if comm.size != P:
        refuse(comm, f"09_pipeline_parallel.py runs one layer per rank on {P} ranks: "
                     f"mpiexec -n {P} python mpi_examples/09_pipeline_parallel.py")
    batch = make_batch()
    if comm.rank == 0:
        print(f"1. naive model distribution by hand: MLP {SIZES}, layer r on rank r, one "
              f"micro-batch of {ROWS} rows", flush=True)
    naive_ms = by_hand(comm, batch, nn.MLP(SIZES, np.random.default_rng(SEED), np.float64))
    if comm.rank == 0:
        print("\n2. the Pipeline strategy on the same model and batch", flush=True)
    for label in ("GPipe", "1F1B"):
        pipelined(comm, label, batch, naive_ms)


if __name__ == "__main__":
    main()
