# mpiexec -n 2 python mpi_examples/06_buckets_and_overlap.py
"""Gradient buckets and overlap: which gradients travel together, and when each bucket goes.

Why buckets. A message of n bytes costs about α + n/β: a latency α (microseconds on one node,
tens of them between nodes) plus its bytes over the bandwidth β. One all-reduce per parameter pays
α for every array, and a model has many small ones (biases, norms); packing gradients into
buckets of at most ``bucket_bytes`` pays α once per bucket for the same bytes (Li et al. 2020,
PyTorch DDP, §3.2.2).

Why overlap. Backward finishes gradients from the last layer to the first, so the plan packs the
parameters in reverse definition order (``dp.order``): bucket 0 holds the head, ready first, and
its all-reduce starts while backward is still computing earlier layers (§3.2.3). Each gradient
that becomes ready also advances the all-reduces in flight.

Why the same start order on every rank. Collectives are matched by position: the k-th one a
rank starts pairs with the k-th one of every other rank. Were rank 0 to start bucket 2 before
bucket 1 because its gradients happened to be ready in another order, its bucket 2 would be
added to rank 1's bucket 1: a wrong sum, or a hang when their sizes differ. So a bucket starts
only when it and every bucket before it are complete, and the buckets go in plan order.

Why the last bucket can never overlap. It holds the first layers (the embeddings), whose
gradients are the last thing backward computes: once it can start there is no compute left to
hide it behind, so all of its time is added to the step.
"""

import textwrap

import numpy as np

from scratchpar import nn
from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.optim import SGD
from scratchpar.parallel import DataParallel, DataParallelNaive
from scratchpar.trace.tracer import Tracer
from scratchpar.train.task import Task

VOCAB, SEQ, ROWS, BUCKET_BYTES = 11, 8, 6, 8192


def make_gpt():
    """A tiny one-block GPT in float64, the same on every rank (DataParallel broadcasts anyway)."""
    return nn.GPT(VOCAB, SEQ, 16, 2, 1, np.random.default_rng(5), dtype=np.float64)


def make_batch(step):
    """Global batch ``step``: token ids (ROWS, SEQ+1) without padding, the same on every rank."""
    return np.random.default_rng([9, step]).integers(1, VOCAB, (ROWS, SEQ + 1))


def print_plan(dp, names):
    """Each bucket's parameters by name, in the order their all-reduces start."""
    print(f"{len(dp.order)} parameter arrays in {len(dp.plan)} buckets of at most {BUCKET_BYTES} "
          f"bytes (one all-reduce per parameter would be {len(dp.order)}):")
    for k, members in enumerate(dp.plan.members):
        nbytes = dp.plan.sizes[k] * dp.plan.dtypes[k].itemsize
        print(textwrap.fill(", ".join(names[id(dp.order[j])] for j in members), 100,
                            initial_indent=f"  bucket {k} ({nbytes:5d} bytes): ",
                            subsequent_indent=" " * 27))


def bucket_events(tracer):
    """Backward's event and the bucket all-reduces, in the order they started.

    The step's first all-reduce (its Σ loss, Σ units, 16 bytes) starts during forward; every
    collective started from backward on is a bucket."""
    backward = next(e for e in tracer.events if e.name == "backward")
    comm = [e for e in tracer.events if e.cat == "comm" and e.start >= backward.start]
    return backward, sorted(comm, key=lambda e: e.start)


def print_timeline(backward, events):
    """When each bucket's all-reduce started and ended, in µs from backward's end (negative:
    while backward was still running)."""
    took = (backward.end - backward.start) / 1e3
    print(f"\nstep 2, traced on rank 0: backward took {took:.0f} µs; times in µs from its end "
          "(they vary from run to run)")
    for k, e in enumerate(events):
        start, end = (e.start - backward.end) / 1e3, (e.end - backward.end) / 1e3
        print(f"  bucket {k}  {e.name:<29} {e.bytes:5d} B  start {start:+8.1f}  end {end:+8.1f}"
              f"  {'hidden' if end < 0 else 'exposed'}")
    tail = max(0.0, max(e.end for e in events) - backward.end) / 1e3
    print(f"communication left after backward (exposed, added to the step): {tail:.1f} µs")


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    say = comm.rank == 0
    model, twin, mesh = make_gpt(), make_gpt(), Mesh(comm)  # Mesh(comm): every rank a replica
    lm = Task(None, model, "tok")  # the objective: next-token loss, summed over target tokens
    dp = DataParallel(model, lambda params: SGD(params, lr=0.1), lm, mesh,
                      bucket_bytes=BUCKET_BYTES)
    naive = DataParallelNaive(twin, lambda params: SGD(params, lr=0.1), lm, mesh)
    names = {id(p): name for name, p in model.named_parameters()}
    if say:
        print_plan(dp, names)

    dp.step(make_batch(1))  # step 1 allocates the bucket buffers; step 2 is traced
    naive.step(make_batch(1))
    batch = make_batch(2)
    comm.tracer = tracer = Tracer(comm.rank)  # records forward/backward/optimizer and collectives
    tracer.align(comm.barrier)
    dp.step(batch)
    comm.tracer = None
    naive.step(batch)  # the spec: one blocking all-reduce per parameter, after backward

    backward, events = bucket_events(tracer)
    plan_bytes = [n * d.itemsize for n, d in zip(dp.plan.sizes, dp.plan.dtypes)]
    # Checked by their sizes: a bucket started out of order would show another size.
    in_order = comm.allgather_obj([e.bytes for e in events] == plan_bytes)
    diff = max(float(np.abs(p.grad - q.grad).max())
               for p, q in zip(model.parameters(), twin.parameters()))
    diffs = comm.allgather_obj(diff)
    for strategy in (dp, naive):
        strategy.close()
    mesh.free()
    if say:
        print_timeline(backward, events)
        last = ", ".join(names[id(dp.order[j])] for j in dp.plan.members[-1])
        print(f"the last bucket ({last}) started in the hook of the last gradient, "
              f"{(backward.end - events[-1].start) / 1e3:.1f} µs before backward's end:\n"
              "  that was the hook packing and posting it; no compute was left to hide it")
        print(f"bucket all-reduces started in plan order on every rank: "
              f"{'yes' if all(in_order) else 'NO'}")
        print(f"max |gradient − DataParallelNaive's| over parameters and ranks: {max(diffs):.1e}"
              f"  (below 1e-12: {'yes' if max(diffs) < 1e-12 else 'NO'})", flush=True)


if __name__ == "__main__":
    main()
