"""The collectives benchmark: the hand-written all-reduces against MPI's own."""
