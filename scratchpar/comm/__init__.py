"""Communication: a Communicator over mpi4py, hand-written collectives, their reference, a mesh."""
