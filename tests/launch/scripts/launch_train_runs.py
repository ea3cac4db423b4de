"""``python -m scratchpar.train`` once per argument list, one after another in one MPI job, so
that a test checks several runs for the cost of one launch. The lists are separated by
``--next``; rank 0 prints ``run i: exit s`` after each, and the job exits with the largest.
A run starts when every rank has finished the one before (its checkpoint is written)."""

import sys

from scratchpar.allocator import keep_freed_memory
from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.mpi import Communicator
from scratchpar.train.__main__ import main

keep_freed_memory()  # as python -m scratchpar.train does
world = Communicator(name="world")
abort_on_exception(world)
runs = [[]]
for token in sys.argv[1:]:
    if token == "--next":
        runs.append([])
    else:
        runs[-1].append(token)
statuses = []
for i, run in enumerate(runs):
    statuses.append(main(run, comm=world))
    if world.rank == 0:
        print(f"run {i}: exit {statuses[-1]}", flush=True)
    world.barrier()  # rank 0 has written the last run's files
sys.exit(max(statuses))
