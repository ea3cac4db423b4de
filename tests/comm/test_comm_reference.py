"""The reference collectives against each other and against elementwise oracles, in one process."""

import doctest

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.comm import reference
from scratchpar.comm.chunks import counts
from scratchpar.comm.errors import CommError

DTYPES = ("float32", "float64", "int32", "int64")


@st.composite
def worlds(draw, equal_rows=True):
    """``p`` blocks of one dtype and row shape: n rows each (0, 1, non-divisible by p, …)."""
    p = draw(st.integers(1, 6))
    n = draw(st.integers(0, 13))
    tail = draw(st.sampled_from([(), (2,), (3, 2)]))
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    rows = [n] * p if equal_rows else draw(st.lists(st.integers(0, 4), min_size=p, max_size=p))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dtype.kind == "f":
        blocks = [rng.standard_normal((r, *tail)).astype(dtype) for r in rows]
    else:
        blocks = [rng.integers(-1000, 1000, (r, *tail), dtype=dtype) for r in rows]
    return blocks


def ops_for(dtype):
    return ("sum", "avg", "max", "min") if np.dtype(dtype).kind == "f" else ("sum", "max", "min")


def test_module_example_runs():
    assert doctest.testmod(reference).failed == 0


@given(worlds())
def test_all_reduce_is_the_elementwise_reduction(blocks):
    stacked = np.stack(blocks)  # (p, n, …)
    p = len(blocks)
    for op in ops_for(blocks[0].dtype):
        want = {"sum": stacked.sum(0, dtype=stacked.dtype), "max": stacked.max(0),
                "min": stacked.min(0), "avg": stacked.sum(0, dtype=stacked.dtype) / p}[op]
        for out in reference.all_reduce(blocks, op):
            assert out.dtype == blocks[0].dtype and out.shape == blocks[0].shape
            tol = 1e-5 if out.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(out, want, rtol=tol, atol=tol)


def test_integer_sums_are_exact():
    big = np.iinfo(np.int64).max // 4
    blocks = [np.array([big, 1, -big], np.int64) for _ in range(3)]
    out = reference.all_reduce(blocks, "sum")[0]
    assert out.tolist() == [3 * big, 3, -3 * big]


@given(worlds())
def test_reduce_scatter_then_all_gather_is_all_reduce(blocks):
    for op in ops_for(blocks[0].dtype):
        pieces = reference.reduce_scatter(blocks, op)
        assert [len(x) for x in pieces] == counts(len(blocks[0]), len(blocks))
        for joined, whole in zip(reference.all_gather(pieces), reference.all_reduce(blocks, op)):
            assert np.array_equal(joined, whole)


@given(worlds(), st.integers(0, 5))
def test_reduce_reaches_only_the_root(blocks, root):
    root %= len(blocks)
    outs = reference.reduce(blocks, "max", root)
    assert [o is None for o in outs] == [i != root for i in range(len(blocks))]
    assert np.array_equal(outs[root], reference.all_reduce(blocks, "max")[root])


@given(worlds(equal_rows=False), st.integers(0, 5))
def test_gather_joins_blocks_of_any_row_counts_on_the_root(blocks, root):
    root %= len(blocks)
    outs = reference.gather(blocks, root)
    assert [o is None for o in outs] == [i != root for i in range(len(blocks))]
    assert len(outs[root]) == sum(len(b) for b in blocks)
    start = 0
    for b in blocks:  # block i sits right after blocks 0..i-1
        assert np.array_equal(outs[root][start:start + len(b)], b)
        start += len(b)
    assert all(np.array_equal(g, outs[root]) for g in reference.all_gather(blocks))


@given(worlds(), st.integers(0, 5))
def test_scatter_then_gather_is_identity(blocks, root):
    root %= len(blocks)
    full = np.concatenate(blocks)
    inputs = [full if i == root else None for i in range(len(blocks))]
    pieces = reference.scatter(inputs, root)
    assert [len(x) for x in pieces] == counts(len(full), len(blocks))
    assert np.array_equal(reference.gather(pieces, root)[root], full)


@given(worlds(), st.integers(0, 5))
def test_broadcast_copies_the_root_block(blocks, root):
    root %= len(blocks)
    outs = reference.broadcast(blocks, root)
    assert all(np.array_equal(o, blocks[root]) and o is not blocks[root] for o in outs)


def test_non_divisible_split_gives_the_extra_rows_to_the_first_ranks():
    blocks = [np.arange(5) * (i + 1) for i in range(3)]  # sum = 6 · arange(5)
    pieces = reference.reduce_scatter(blocks)
    assert [x.tolist() for x in pieces] == [[0, 6], [12, 18], [24]]
    assert [x.tolist() for x in reference.scatter(blocks, root=2)] == [[0, 3], [6, 9], [12]]


def test_avg_of_integers_and_unknown_ops_are_refused():
    blocks = [np.arange(4), np.arange(4)]
    with pytest.raises(CommError, match="floating"):
        reference.all_reduce(blocks, "avg")
    with pytest.raises(CommError, match="prod"):
        reference.reduce_scatter(blocks, "prod")


@st.composite
def exchanges(draw):
    """``p`` blocks and the counts ``counts[i][j]`` of rows rank i sends rank j (zeros often)."""
    p = draw(st.integers(1, 6))
    counts = draw(st.lists(st.lists(st.integers(0, 3) | st.just(0), min_size=p, max_size=p),
                           min_size=p, max_size=p))
    tail = draw(st.sampled_from([(), (2,), (3, 2)]))
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    blocks = [rng.standard_normal((sum(c), *tail)).astype(dtype) if dtype.kind == "f" else
              rng.integers(-1000, 1000, (sum(c), *tail), dtype=dtype) for c in counts]
    return blocks, counts


@given(worlds())
def test_all_to_all_transposes_the_blocks_and_twice_is_identity(blocks):
    p = len(blocks)
    equal = [np.concatenate([b] * p) for b in blocks]  # p·n rows each
    n = len(blocks[0])
    outs = reference.all_to_all(equal)
    for j, out in enumerate(outs):
        assert out.shape == equal[j].shape and out.dtype == equal[j].dtype
        for i in range(p):  # block i of rank j's result is block j of rank i's input
            assert np.array_equal(out[i * n:(i + 1) * n], equal[i][j * n:(j + 1) * n])
    assert all(np.array_equal(a, b) for a, b in zip(reference.all_to_all(outs), equal))


@given(worlds())
def test_all_to_all_v_of_equal_counts_is_all_to_all(blocks):
    p, n = len(blocks), len(blocks[0])
    equal = [np.concatenate([b] * p) for b in blocks]
    for (rows, received), want in zip(reference.all_to_all_v(equal, [[n] * p] * p),
                                      reference.all_to_all(equal)):
        assert received == [n] * p and np.array_equal(rows, want)


@given(exchanges())
def test_all_to_all_v_sends_each_rank_its_rows_and_back(exchange):
    blocks, counts = exchange
    p = len(blocks)
    outs = reference.all_to_all_v(blocks, counts)
    for j, (rows, received) in enumerate(outs):
        assert received == [counts[i][j] for i in range(p)] and len(rows) == sum(received)
        start = 0
        for i in range(p):  # rank i's rows for rank j follow its rows for ranks 0..j−1
            first = sum(counts[i][:j])
            assert np.array_equal(rows[start:start + counts[i][j]],
                                  blocks[i][first:first + counts[i][j]])
            start += counts[i][j]
    back = reference.all_to_all_v([r for r, _ in outs], [r for _, r in outs])  # the combine
    for (rows, received), block, sent in zip(back, blocks, counts):
        assert received == sent and np.array_equal(rows, block)


def test_all_to_all_v_refuses_counts_that_do_not_sum_to_the_rows():
    with pytest.raises(CommError, match="rank 1's counts \\[2, 2\\] do not sum to its 3 rows"):
        reference.all_to_all_v([np.arange(2), np.arange(3)], [[1, 1], [2, 2]])
