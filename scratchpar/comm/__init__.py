"""Communication: a Communicator over mpi4py, hand-written collectives, their reference, a mesh."""

from scratchpar.comm.settings import apply_rank_defaults

apply_rank_defaults()  # before any module here imports mpi4py, whose import starts MPI
