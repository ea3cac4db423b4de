"""Every collective under every algorithm against comm/reference.py, on the real ranks.

Each rank builds every rank's input from (example seed, rank), so it computes the expected
output locally from the reference: the only messages are those of the collective under test.
The inputs live on the test's device; results are compared on the host.
"""

import hashlib
import time
from typing import NamedTuple

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st
from mpi_helpers import covering, shared_verdict

from scratchpar.comm import choice, collectives, reference
from scratchpar.comm.errors import CommError

ALGORITHMS = choice.ALGORITHMS
DTYPES = ("float32", "float64", "int32", "int64")
RTOL = {np.dtype("float32"): 1e-5, np.dtype("float64"): 1e-12}  # reduction order differs


class Case(NamedTuple):
    seed: int
    shape: tuple  # each rank's block; ``extra`` more rows per rank number where rows may differ
    dtype: str
    op: str
    root: int  # taken modulo the world size
    extra: int = 0

    def block(self, rank: int, rows: int | None = None):
        """Rank ``rank``'s input, the same wherever it is built."""
        rng = np.random.default_rng([self.seed, rank])
        shape = (self.shape[0] if rows is None else rows, *self.shape[1:])
        if np.dtype(self.dtype).kind == "f":
            return rng.standard_normal(shape).astype(self.dtype)
        return rng.integers(-1000, 1000, shape, dtype=self.dtype)

    def blocks(self, p: int, uneven: bool = False):
        return [self.block(i, self.shape[0] + uneven * self.extra * i) for i in range(p)]


@st.composite
def cases(draw):
    """Row counts 0, 1, not divisible by p, a few thousand; 1-d to 3-d; every dtype and op."""
    rows = draw(st.integers(0, 9) | st.integers(10, 3000))
    tail = draw(st.sampled_from([(), (3,), (2, 3)]))
    dtype = draw(st.sampled_from(DTYPES))
    op = draw(st.sampled_from(("sum", "avg", "max", "min") if "float" in dtype else
                              ("sum", "max", "min")))
    return Case(draw(st.integers(0, 2**32 - 1)), (rows, *tail), dtype, op,
                draw(st.integers(0, 3)), draw(st.integers(0, 3)))


EDGES = (Case(1, (0,), "float64", "sum", 0, 2), Case(2, (1, 3), "int32", "max", 1, 0),
         Case(3, (45000, 3), "float64", "avg", 3, 1))  # the last is past all-reduce's auto switch


covering_edges = covering(EDGES)


def assert_matches(got, want):
    got = host(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=RTOL[want.dtype], atol=RTOL[want.dtype])
    else:
        assert np.array_equal(got, want)


def same_bits_everywhere(comm, x) -> bool:
    return len(set(comm.allgather_obj(hashlib.sha256(host(x).tobytes()).hexdigest()))) == 1


@pytest.mark.parametrize("algorithm", ALGORITHMS["all_reduce"])
@covering_edges
@given(case=cases())
@shared_verdict
def test_all_reduce(comm, algorithm, case):
    blocks = case.blocks(comm.size)
    want = reference.all_reduce(blocks, case.op)[comm.rank]
    mine = on_device(blocks[comm.rank].copy())
    got = collectives.all_reduce(comm, mine, case.op, algorithm)
    assert_matches(got, want)
    assert np.array_equal(host(mine), blocks[comm.rank])  # the input is left alone
    buf = on_device(blocks[comm.rank].copy())
    assert collectives.all_reduce_(comm, buf, case.op, algorithm) is buf
    assert_matches(buf, want)
    if algorithm != "mpi":
        assert same_bits_everywhere(comm, got)
        assert np.array_equal(host(buf), host(got))  # the same algorithm: the same bits in place


@pytest.mark.parametrize("algorithm", ALGORITHMS["all_reduce"])
@covering_edges
@given(case=cases())
@shared_verdict
def test_all_reduce_start_overlaps_and_matches_the_blocking_call(comm, algorithm, case):
    mine, other = case.block(comm.rank), case._replace(seed=case.seed + 1).block(comm.rank)
    blocking = host(collectives.all_reduce(comm, on_device(mine), case.op, algorithm))
    first = collectives.all_reduce_start(comm, on_device(mine.copy()), case.op, algorithm)
    second = collectives.all_reduce_start(comm, on_device(other.copy()), case.op, "tree")
    deadline = time.monotonic() + 30
    while not (first.test() & second.test()):  # `&`: advance both every round
        assert time.monotonic() < deadline, "all_reduce_start never completed under test()"
        time.sleep(1e-4)
    if algorithm == "mpi":
        assert_matches(first.result, blocking)
    else:
        assert np.array_equal(host(first.result), blocking)
    others = case._replace(seed=case.seed + 1).blocks(comm.size)
    assert_matches(second.result, reference.all_reduce(others, case.op)[comm.rank])


@pytest.mark.parametrize("algorithm", ALGORITHMS["reduce_scatter"])
@covering_edges
@given(case=cases())
@shared_verdict
def test_reduce_scatter(comm, algorithm, case):
    blocks = case.blocks(comm.size)
    got = collectives.reduce_scatter(comm, on_device(blocks[comm.rank]), case.op, algorithm)
    assert_matches(got, reference.reduce_scatter(blocks, case.op)[comm.rank])


@covering_edges
@given(case=cases())
@shared_verdict
def test_reduce_scatter_start_and_all_gather_start_work_in_place_on_a_flat_buffer(comm, case):
    blocks = [b.reshape(-1) for b in case.blocks(comm.size)]
    flat = on_device(blocks[comm.rank].copy())
    reduced = collectives.reduce_scatter_start(comm, flat, case.op).wait()
    want = reference.reduce_scatter(blocks, case.op)[comm.rank]
    assert_matches(reduced, want)
    reduced_bytes = host(reduced).copy()
    assert collectives.all_gather_start(comm, flat).wait() is flat  # in place
    chunks = reference.reduce_scatter(blocks, case.op)  # every rank's reduced chunk
    assert_matches(flat, reference.all_gather(chunks)[comm.rank])
    assert np.array_equal(host(reduced), reduced_bytes)  # a rank's own chunk is not rewritten


@pytest.mark.parametrize("algorithm", ALGORITHMS["all_gather"])
@covering_edges
@given(case=cases())
@shared_verdict
def test_all_gather_of_uneven_blocks(comm, algorithm, case):
    blocks = case.blocks(comm.size, uneven=True)
    want, mine = reference.all_gather(blocks)[comm.rank], on_device(blocks[comm.rank])
    assert_matches(collectives.all_gather(comm, mine, algorithm), want)
    rows = [len(b) for b in blocks]  # given, the row counts need no exchange
    assert_matches(collectives.all_gather(comm, mine, algorithm, rows), want)


@pytest.mark.parametrize("algorithm", ALGORITHMS["broadcast"])
@covering_edges
@given(case=cases())
@shared_verdict
def test_broadcast(comm, algorithm, case):
    blocks = case.blocks(comm.size)
    root = case.root % comm.size
    buf = on_device(blocks[comm.rank].copy())
    assert collectives.broadcast_(comm, buf, root, algorithm) is buf
    assert_matches(buf, reference.broadcast(blocks, root)[comm.rank])
    assert np.array_equal(host(buf), blocks[root])


@pytest.mark.parametrize("algorithm", ALGORITHMS["reduce"])
@covering_edges
@given(case=cases())
@shared_verdict
def test_reduce(comm, algorithm, case):
    blocks = case.blocks(comm.size)
    root = case.root % comm.size
    got = collectives.reduce(comm, on_device(blocks[comm.rank]), case.op, root, algorithm)
    want = reference.reduce(blocks, case.op, root)[comm.rank]
    if want is None:
        assert got is None
    else:
        assert_matches(got, want)


@pytest.mark.parametrize("algorithm", ALGORITHMS["gather"])
@covering_edges
@given(case=cases())
@shared_verdict
def test_gather_of_uneven_blocks(comm, algorithm, case):
    blocks = case.blocks(comm.size, uneven=True)
    root = case.root % comm.size
    got = collectives.gather(comm, on_device(blocks[comm.rank]), root, algorithm)
    want = reference.gather(blocks, root)[comm.rank]
    if want is None:
        assert got is None
    else:
        assert_matches(got, want)


@pytest.mark.parametrize("algorithm", ALGORITHMS["scatter"])
@covering_edges
@given(case=cases())
@shared_verdict
def test_scatter(comm, algorithm, case):
    blocks = case.blocks(comm.size)
    root = case.root % comm.size
    mine = on_device(blocks[root]) if comm.rank == root else None
    got = collectives.scatter(comm, mine, root, algorithm)
    assert_matches(got, reference.scatter(blocks, root)[comm.rank])


def _strided():
    return on_device(np.ones((4, 6)))[:, ::2]  # (4, 3), not C-contiguous


def ones(*shape, dtype=np.float64):
    return on_device(np.ones(shape, dtype))


def scalar():
    return on_device(np.array(1.0))


OUTSIDE = r"root -?\d+ is outside 0\.\."
BAD_CALLS = {
    "unknown algorithm": (lambda c: collectives.all_reduce(c, ones(4), algorithm="nccl"),
                          "algorithm must be one of"),
    "algorithm of another collective": (
        lambda c: collectives.broadcast_(c, ones(4), algorithm="ring"), "got 'ring'"),
    "unknown op": (lambda c: collectives.all_reduce(c, ones(4), "prod"), "'prod'"),
    "avg of int all_reduce": (lambda c: collectives.all_reduce(c, ones(4, dtype=np.int32), "avg"),
                              "floating"),
    "avg of int reduce_scatter": (
        lambda c: collectives.reduce_scatter(c, ones(4, dtype=np.int64), "avg"), "floating"),
    "avg of int reduce": (lambda c: collectives.reduce(c, ones(4, dtype=np.int64), "avg"),
                          "floating"),
    "root too big": (lambda c: collectives.broadcast_(c, ones(4), root=c.size),
                     OUTSIDE),
    "negative root": (lambda c: collectives.reduce(c, ones(4), root=-1), OUTSIDE),
    "gather root": (lambda c: collectives.gather(c, ones(4), root=c.size), OUTSIDE),
    "scatter root": (lambda c: collectives.scatter(c, ones(4), root=c.size), OUTSIDE),
    "strided all_reduce_": (lambda c: collectives.all_reduce_(c, _strided()), "C-contiguous"),
    "strided all_reduce_start": (lambda c: collectives.all_reduce_start(c, _strided()),
                                 "C-contiguous"),
    "strided broadcast_": (lambda c: collectives.broadcast_(c, _strided()), "C-contiguous"),
    "0-d all_gather": (lambda c: collectives.all_gather(c, scalar()), "axis 0"),
    "0-d reduce_scatter": (lambda c: collectives.reduce_scatter(c, scalar()), "axis 0"),
    "0-d gather": (lambda c: collectives.gather(c, scalar()), "axis 0"),
    "0-d scatter": (lambda c: collectives.scatter(c, scalar() if c.rank == 0 else None),
                    "axis 0"),
    "rows of another world": (
        lambda c: collectives.all_gather(c, ones(2, 3), rows=[2] * (c.size + 1)),
        "one count per rank"),
    "scatter of nothing": (lambda c: collectives.scatter(c, None), "root .rank 0. passed None"),
    "wrong rows": (lambda c: collectives.all_gather(c, ones(2, 3), rows=[3] * c.size),
                   r"rows\[\d\] = 3 but x has 2 rows"),
    "unknown all_to_all algorithm": (
        lambda c: collectives.all_to_all(c, ones(c.size), "ring"), "algorithm must be one of"),
    "0-d all_to_all": (lambda c: collectives.all_to_all(c, on_device(np.array(1.0))), "axis 0"),
    "0-d all_to_all_v": (lambda c: collectives.all_to_all_v(c, on_device(np.array(1.0)), [1]),
                         "axis 0"),
    "counts of another world": (
        lambda c: collectives.all_to_all_v(c, ones(1), [1] + [0] * c.size),
        r"one whole row count ≥ 0 per rank \(\d\)"),
    "negative count": (lambda c: collectives.all_to_all_v(c, ones(0), [-1] + [1] * (c.size - 1)),
                       "≥ 0"),
    "fractional count": (lambda c: collectives.all_to_all_v(c, ones(0), [0.5] * c.size),
                         "whole row count"),
    "counts short of the rows": (lambda c: collectives.all_to_all_v(c, ones(c.size + 1),
                                                                    [1] * c.size),
                                 r"sum to \d rows but x has \d"),
    "received of another world": (
        lambda c: collectives.all_to_all_v(c, ones(0), [0] * c.size, received=[0] * (c.size + 1)),
        "received needs one"),
}


@pytest.mark.parametrize("name", BAD_CALLS)
@shared_verdict
def test_bad_arguments_raise_on_every_rank_then_the_ranks_go_on(comm, name):
    call, match = BAD_CALLS[name]
    with pytest.raises(CommError, match=match):
        call(comm)
    total = collectives.all_reduce(comm, on_device(np.full(3, comm.rank + 1.0)), algorithm="ring")
    assert host(total).tolist() == [comm.size * (comm.size + 1) / 2] * 3  # still in lockstep
