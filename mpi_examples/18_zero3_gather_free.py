# mpiexec -n 4 python mpi_examples/18_zero3_gather_free.py
"""ZeRO-3, one step as it happens: each layer gathered just before it runs, freed just after.

Between uses a ZeRO-3 rank holds only its quarter of every layer's parameters. For one step
of a 3-block GPT, rank 0 prints, in order:
- each all-gather that makes a layer whole, and each reduce-scatter of a layer's gradient;
- how long each layer stayed gathered (the "layer i gathered" regions of the trace).

In forward the next layer's gather starts behind the layer computing (prefetch), and so does
the previous one's in backward. The root group, the tied embedding that the first and the last
layer share, stays gathered for the whole step. The step then shows two things: no gathered
buffer outlives it, and the autograd graph held tokens, not parameters, between forward and
backward.
"""

import numpy as np

from scratchpar import nn
from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.optim import AdamW
from scratchpar.parallel.ledger import Ledger
from scratchpar.parallel.zero import ZeRO3
from scratchpar.trace.tracer import Tracer
from scratchpar.train.task import Task

VOCAB, SEQ, WIDTH, HEADS, BLOCKS, ROWS = 32, 16, 32, 4, 3, 8


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    task = Task(None, nn.GPT(VOCAB, SEQ, WIDTH, HEADS, BLOCKS, np.random.default_rng(0),
                             tie_embeddings=True), "tok")
    mesh = Mesh(comm)  # pure data parallelism: every rank a chunk of every layer
    zero = ZeRO3(task.model, lambda params: AdamW(params, lr=1e-3), task, mesh)
    ledger = zero.attach(Ledger())  # what the graph holds after forward, among the rest
    batch = np.random.default_rng(1).integers(1, VOCAB, (ROWS, SEQ + 1))  # (B, T + 1)
    zero.step(batch)  # a first step, untraced: buffers and pools settle
    comm.tracer = Tracer(comm.rank)
    zero.step(batch)
    events = sorted(comm.tracer.events, key=lambda e: e.start)
    comm.tracer = None
    zero.close()
    mesh.free()
    if comm.rank != 0:
        return
    print(f"layers: {', '.join(zero.labels)}; {comm.size} ranks; rank 0 holds "
          f"{sum(f.size for f in zero.flats):,} of {sum(g.n for g in zero.groups):,} parameters")
    for e in events:
        if e.cat == "comm" and e.bytes > 64:  # the layers' collectives, not the loss's
            print(f"  {e.start / 1e6:7.2f} ms  {e.name:<20} {e.bytes:>7,} bytes")
        elif e.cat == "compute" and e.name in ("forward", "backward", "optimizer"):
            print(f"  {e.start / 1e6:7.2f} ms  {e.name}")
    print("gathered, start → end (ms):")
    for e in events:
        if e.cat == "memory":
            print(f"  {e.name:<16} {e.start / 1e6:7.2f} → {e.end / 1e6:7.2f}  {e.bytes:>7,} bytes")
    print(f"gathers {zero.gathers}, frees {zero.frees} over two steps; gathered buffers still "
          f"alive after the step: {zero.resident()}")
    print(f"the graph after forward held {ledger.activations:,} bytes, none of them parameters")


if __name__ == "__main__":
    main()
