"""Rank 0 all-gathers 10 float64 while rank 1 all-gathers 20 float32, the same 80 bytes (2 ranks).

With SCRATCHPAR_DEBUG=1 the ranks first compare their calls: each mismatch below raises
CollectiveMismatch on both ranks (caught and printed, to show several in one job), and the last
one escapes and ends the job. Without debug mode the all-gather itself runs (see the test).
"""

import numpy as np

from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.collectives import all_gather, all_reduce
from scratchpar.comm.errors import CollectiveMismatch
from scratchpar.comm.mpi import Communicator

comm = Communicator(name="world")
abort_on_exception(comm)
mine = np.arange(10.0) if comm.rank == 0 else np.arange(20, dtype=np.float32)
if comm.debug:
    different_calls = [  # rank 0's call, rank 1's call
        (lambda: all_reduce(comm, np.ones(3)), comm.barrier),
        (lambda: all_gather(comm, mine), lambda: comm.allgather_obj("user metadata")),
    ]
    for case, calls in enumerate(different_calls):
        try:
            calls[comm.rank]()
        except CollectiveMismatch as error:
            print(f"case {case}, rank {comm.rank} caught: {error}", flush=True)
out = all_gather(comm, mine)
print(f"rank {comm.rank} received {out.dtype} {out.tolist()}", flush=True)
