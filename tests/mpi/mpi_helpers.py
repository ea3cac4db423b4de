"""What the MPI-tier tests share: the world communicator and the shared verdict."""

import functools
import os

os.environ.setdefault("SCRATCHPAR_COMM_TIMEOUT", "60")  # a stuck test fails instead of hanging

from scratchpar.comm.mpi import Communicator  # noqa: E402  (after the timeout is set)

WORLD = Communicator(name="world")


def shared_verdict(test):
    """Run ``test`` on every rank, then fail on every rank if it failed on any.

    Put it under ``@given``: Hypothesis then sees the same pass/fail on all ranks and shrinks
    the same way everywhere.
    """

    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        try:
            test(*args, **kwargs)
            mine = None
        except Exception as error:  # any failure on this rank, to be shared
            mine = f"{type(error).__name__}: {error}"
            raised = error
        else:
            raised = None
        verdicts = WORLD.allgather_obj(mine)
        failed = {rank: v for rank, v in enumerate(verdicts) if v is not None}
        if failed:
            lines = "\n".join(f"rank {r}: {v}" for r, v in failed.items())
            raise AssertionError(f"failed on {len(failed)} of {WORLD.size} ranks:\n{lines}") \
                from raised

    return wrapper
