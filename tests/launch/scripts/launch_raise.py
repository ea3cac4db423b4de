"""Rank 1 raises after one all-reduce while the others wait in the next (run on 3 ranks)."""

import sys
import time

import numpy as np

from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.collectives import all_reduce
from scratchpar.comm.mpi import Communicator

comm = Communicator(name="world")
abort_on_exception(comm)
all_reduce(comm, np.arange(10.0))
if comm.rank == 1:
    print("rank 1 printed this, unflushed, before it raised")  # the hook flushes it
    print(f"rank 1 raises at {time.time():.3f}", file=sys.stderr, flush=True)
    raise ValueError("a bug on rank 1")
all_reduce(comm, np.arange(10.0))  # never completes: rank 1 is gone
print(f"rank {comm.rank} finished, but should have been ended", flush=True)
