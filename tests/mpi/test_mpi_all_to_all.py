"""All-to-all and all-to-all-v on the real ranks: the pairwise exchange and MPI's own
(MPI_Alltoall, MPI_Alltoallv) against comm/reference.py and against each other, bit for bit.

Each rank builds every rank's input and every rank's counts from (example seed, rank), so it
computes the expected output locally: the only messages are those of the collectives under test.
The inputs live on the test's device; results are compared on the host.
"""

from typing import NamedTuple

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st
from mpi_helpers import WORLD, covering, shared_verdict

from scratchpar.comm import collectives, reference
from scratchpar.comm.choice import ALGORITHMS as ALGORITHMS_OF
from scratchpar.comm.errors import CollectiveMismatch, CommError

ALGORITHMS = ALGORITHMS_OF["all_to_all"]
DTYPES = ("float32", "float64", "int32", "int64")


class Case(NamedTuple):
    seed: int
    rows: int  # all_to_all: the rows of each block; all_to_all_v: the most to one rank
    tail: tuple  # the shape of a row
    dtype: str
    empty: float  # all_to_all_v: the share of (sender, receiver) pairs that send no rows

    def block(self, rank: int, rows: int):
        """Rank ``rank``'s input of ``rows`` rows, the same wherever it is built."""
        rng = np.random.default_rng([self.seed, rank])
        shape = (rows, *self.tail)
        if np.dtype(self.dtype).kind == "f":
            return rng.standard_normal(shape).astype(self.dtype)
        return rng.integers(-1000, 1000, shape, dtype=self.dtype)

    def counts(self, p: int) -> list[list[int]]:
        """``counts[i][j]``: the rows rank i sends rank j."""
        rng = np.random.default_rng([self.seed, p, 1])
        drawn = rng.integers(0, self.rows + 1, (p, p))
        return np.where(rng.random((p, p)) < self.empty, 0, drawn).tolist()


@st.composite
def cases(draw):
    """Blocks of 0, 1, a few or a few hundred rows; 1-d to 3-d; every dtype."""
    return Case(draw(st.integers(0, 2**32 - 1)), draw(st.integers(0, 4) | st.integers(5, 300)),
                draw(st.sampled_from([(), (3,), (2, 3)])), draw(st.sampled_from(DTYPES)),
                draw(st.sampled_from([0.0, 0.5, 1.0])))


EDGES = (Case(1, 0, (), "float64", 0.0), Case(2, 1, (2, 3), "int64", 1.0),
         Case(3, 2000, (4,), "float32", 0.5))  # empty; no rows at all to send; larger


covering_edges = covering(EDGES)


def assert_equal(got, want):
    """The same dtype, shape and bits: all-to-all only moves rows."""
    got = host(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@covering_edges
@given(case=cases())
@shared_verdict
def test_all_to_all(comm, algorithm, case):
    blocks = [case.block(i, comm.size * case.rows) for i in range(comm.size)]
    mine = on_device(blocks[comm.rank])
    assert_equal(collectives.all_to_all(comm, mine, algorithm),
                 reference.all_to_all(blocks)[comm.rank])
    assert np.array_equal(host(mine), blocks[comm.rank])  # the input is left alone


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@covering_edges
@given(case=cases())
@shared_verdict
def test_all_to_all_v_dispatches_then_combines(comm, algorithm, case):
    counts = case.counts(comm.size)  # (p, p)
    blocks = [case.block(i, sum(counts[i])) for i in range(comm.size)]
    mine = on_device(blocks[comm.rank])
    rows, received = collectives.all_to_all_v(comm, mine, np.array(counts[comm.rank]), algorithm)
    back, sent = collectives.all_to_all_v(comm, rows, received, algorithm,
                                          received=counts[comm.rank])  # no counts exchanged
    want, want_received = reference.all_to_all_v(blocks, counts)[comm.rank]
    assert received == want_received
    assert_equal(rows, want)
    assert sent == counts[comm.rank]
    assert_equal(back, blocks[comm.rank])


@covering_edges
@given(case=cases())
@shared_verdict
def test_the_pairwise_exchange_gives_mpis_own_bits(comm, case):
    x = on_device(case.block(comm.rank, comm.size * case.rows))
    ours, mpis = (collectives.all_to_all(comm, x, name) for name in ("pairwise", "mpi"))
    counts = case.counts(comm.size)[comm.rank]
    x = on_device(case.block(comm.rank, sum(counts)))
    (ours_v, received), (mpis_v, mpi_received) = (collectives.all_to_all_v(comm, x, counts, name)
                                                  for name in ("pairwise", "mpi"))
    assert_equal(ours, host(mpis))
    assert received == mpi_received
    assert_equal(ours_v, host(mpis_v))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@shared_verdict
def test_a_strided_array_is_sent_as_its_rows(comm, algorithm):
    whole = np.random.default_rng([7, comm.rank]).standard_normal((comm.size * 2, 6))
    strided = on_device(whole)[:, ::2]  # (2p, 3), not C-contiguous
    got = collectives.all_to_all(comm, strided, algorithm)
    blocks = [np.random.default_rng([7, i]).standard_normal((comm.size * 2, 6))[:, ::2]
              for i in range(comm.size)]
    assert_equal(got, reference.all_to_all(blocks)[comm.rank])


def ones(*shape):
    return on_device(np.ones(shape))


@pytest.mark.skipif(WORLD.size == 1, reason="one rank's rows always split into one block")
@shared_verdict
def test_rows_that_do_not_split_into_p_equal_blocks_are_refused(comm):
    with pytest.raises(CommError, match="do not split into"):
        collectives.all_to_all(comm, ones(comm.size + 1, 2))


@shared_verdict
def test_in_debug_mode_a_received_count_that_no_rank_sends_raises_on_every_rank(comm):
    checked = comm.dup("debug")
    checked.debug = True
    x, counts = ones(comm.size, 2), [1] * comm.size
    wrong = [2] + [1] * (comm.size - 1) if comm.rank == comm.size - 1 else counts
    try:
        rows, _ = collectives.all_to_all_v(checked, x, counts, received=counts)  # right
        with pytest.raises(CollectiveMismatch, match=f"rank {comm.size - 1} expects 2 rows "
                                                     "from rank 0, which sends it 1"):
            collectives.all_to_all_v(checked, x, counts, received=wrong)
    finally:
        checked.free()
    assert_equal(rows, np.ones((comm.size, 2)))
