"""Message tags: the bound is MPI's own (MPI_TAG_UB), and every number folds into it."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.comm.mpi import Communicator


@pytest.fixture(scope="module")
def world():
    return Communicator(name="world")


def test_the_bound_is_at_least_the_standards_and_alike_on_every_channel(world):
    dup = world.dup(name="dup")
    assert world.tag_ub >= 32767  # the smallest MPI_TAG_UB the MPI standard allows
    assert dup.tag_ub == world.tag_ub
    dup.free()


@given(number=st.integers(0, 2**40))
def test_every_number_folds_into_mpis_range(world, number):
    tag = world.tag(number)
    assert 0 <= tag <= world.tag_ub
    assert tag == (number if number <= world.tag_ub else world.tag(number - world.tag_ub - 1))


def test_a_message_with_the_largest_tag_arrives(world):
    sent, got = np.arange(4.0), np.zeros(4)
    tag = world.tag(world.tag_ub)
    world.wait_all([world.irecv(got, world.rank, tag), world.isend(sent, world.rank, tag)])
    assert np.array_equal(got, sent)
