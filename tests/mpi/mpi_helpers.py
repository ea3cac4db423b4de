"""What the MPI-tier tests share: the world communicator, the shared verdict, and drawn cases
with fixed edges beside them."""

import functools
import os

import pytest
from hypothesis import example, settings

os.environ.setdefault("SCRATCHPAR_COMM_TIMEOUT", "60")  # a stuck test fails instead of hanging

from scratchpar.comm.mpi import Communicator  # noqa: E402  (after the timeout is set)

WORLD = Communicator(name="world")
# Whether MPI puts every rank on one node (MPI_Comm_split_type), as on this machine, or on
# several, as on a cluster or here with MPICH's shared memory off (MPIR_CVAR_NOLOCAL=1,
# docs/mpi.md). A shared window maps one node's memory: where there is none to share, its tests
# check that it is refused, or are skipped.
ONE_NODE = WORLD.local_size == WORLD.size
one_node = pytest.mark.skipif(not ONE_NODE, reason="a shared window maps one node's memory, "
                                                   "and MPI puts these ranks on several nodes")


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


def covering(edges, examples: int = 8):
    """A decorator for a ``@given(case=…)`` test: run it on the fixed ``edges`` cases too,
    beside ``examples`` drawn ones."""

    def decorate(test):
        for case in edges:
            test = example(case=case)(test)
        return settings(max_examples=examples)(test)

    return decorate
