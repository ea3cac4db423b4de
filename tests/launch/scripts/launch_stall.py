"""Rank 1 stops answering: it sleeps instead of broadcasting to ranks 0 and 2 (run on 3 ranks,
with a short SCRATCHPAR_COMM_TIMEOUT; ranks 0 and 2 both receive from rank 1 in the tree)."""

import time

import numpy as np

from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.collectives import broadcast_
from scratchpar.comm.mpi import Communicator

comm = Communicator(name="world")  # creating it synchronizes the ranks: all have started
abort_on_exception(comm)
if comm.rank == 1:
    time.sleep(600)
broadcast_(comm, np.zeros(10), root=1)
print(f"rank {comm.rank} finished, but should have been ended", flush=True)
