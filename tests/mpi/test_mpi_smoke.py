"""The tier's own plumbing: every rank runs, and a shared verdict agrees everywhere."""

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.comm import collectives


@given(n=st.integers(0, 50))
@shared_verdict
def test_all_ranks_draw_the_same_examples(comm, n):
    drawn = comm.allgather_obj(n)
    assert drawn == [n] * comm.size
    total = collectives.all_reduce(comm, on_device(np.full(n, comm.rank, np.int64)))
    assert np.array_equal(host(total), np.full(n, comm.size * (comm.size - 1) // 2))


def test_a_failure_on_one_rank_fails_every_rank(comm):
    @shared_verdict
    def fails_on_the_last_rank():
        assert comm.rank != comm.size - 1, "the last rank disagrees"

    with pytest.raises(AssertionError, match=f"failed on 1 of {comm.size} ranks:\n"
                                             f"rank {comm.size - 1}: .*the last rank disagrees"):
        fails_on_the_last_rank()


def test_gather_obj_brings_every_ranks_metadata_to_rank_0_alone(comm):
    got = comm.gather_obj({"rank": comm.rank, "name": f"r{comm.rank}"}, "smoke gather")
    if comm.rank != 0:
        assert got is None
        return
    assert got == [{"rank": r, "name": f"r{r}"} for r in range(comm.size)]
