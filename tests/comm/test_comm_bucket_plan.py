"""Gradient buckets on one process: the plan's sizes, dtypes, order and offsets; pack and unpack."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.comm.buckets import Buckets
from scratchpar.comm.errors import CommError

PROPERTY = settings(deadline=None, max_examples=60)
DTYPES = (np.float32, np.float64, np.int64)


@st.composite
def array_lists(draw, max_arrays=12):
    """Random arrays: shapes with zero sides allowed, mixed dtypes, distinct values."""
    specs = draw(st.lists(st.tuples(st.lists(st.integers(0, 5), max_size=3),
                                    st.sampled_from(DTYPES)), max_size=max_arrays))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return [(rng.standard_normal(shape) * 100).astype(dtype) for shape, dtype in specs]


def bytes_of(plan, k):
    return plan.sizes[k] * plan.dtypes[k].itemsize


@PROPERTY
@given(array_lists(), st.integers(1, 400))
def test_buckets_respect_the_limit_unless_one_array_exceeds_it(arrays, limit):
    plan = Buckets(arrays, limit)
    for k, members in enumerate(plan.members):
        nonempty = [i for i in members if arrays[i].size]
        assert bytes_of(plan, k) <= limit or len(nonempty) == 1
        assert plan.buffer(k).size == sum(arrays[i].size for i in members)


@PROPERTY
@given(array_lists(), st.integers(1, 400))
def test_a_bucket_holds_one_dtype_and_arrays_keep_their_order(arrays, limit):
    plan = Buckets(arrays, limit)
    assert sorted(i for m in plan.members for i in m) == list(range(len(arrays)))
    for k, members in enumerate(plan.members):
        assert members == sorted(members) and members
        assert {arrays[i].dtype for i in members} == {plan.buffer(k).dtype}
    for dtype in DTYPES:  # the buckets of one dtype hold its arrays in order, end to end
        order = [i for k in range(len(plan)) if plan.dtypes[k] == dtype
                 for i in plan.members[k]]
        assert order == [i for i, a in enumerate(arrays) if a.dtype == dtype]


@PROPERTY
@given(array_lists(), st.integers(1, 400))
def test_offsets_lay_each_bucket_out_end_to_end(arrays, limit):
    plan = Buckets(arrays, limit)
    for members in plan.members:
        start = 0
        for i in members:
            slot = plan.slots[i]
            assert plan.members[slot.bucket] is members
            assert (slot.offset, slot.size, slot.shape) == (start, arrays[i].size, arrays[i].shape)
            start += slot.size


@PROPERTY
@given(array_lists(), st.integers(1, 400))
def test_the_packing_is_greedy(arrays, limit):
    """A new bucket of a dtype opens only because the next array would have overflowed."""
    plan = Buckets(arrays, limit)
    for dtype in DTYPES:
        mine = [k for k in range(len(plan)) if plan.dtypes[k] == dtype]
        for k, nxt in zip(mine, mine[1:]):
            first = next(i for i in plan.members[nxt] if arrays[i].size)
            assert bytes_of(plan, k) + arrays[first].nbytes > limit


def test_a_small_worked_example():
    f32, f64 = np.float32, np.float64
    arrays = [np.ones(3, f32), np.ones((2, 2), f64), np.ones(0, f32), np.ones(2, f32),
              np.ones(10, f32), np.ones(1, f32), np.ones(1, f64)]
    plan = Buckets(arrays, 20)  # 20 bytes: 5 float32 or 2 float64
    assert plan.members == [[0, 2, 3], [1], [4], [5], [6]]  # 1 and 4 are too big: alone
    assert plan.dtypes == [f32, f64, f32, f32, f64]
    assert [s.offset for s in plan.slots] == [0, 0, 3, 3, 0, 0, 0]


@PROPERTY
@given(array_lists(), st.integers(1, 400))
def test_pack_then_unpack_gives_the_arrays_back(arrays, limit):
    plan = Buckets(arrays, limit)
    plan.pack(arrays)
    buffers = [plan.buffer(k) for k in range(len(plan))]
    back = plan.unpack()
    for a, b in zip(arrays, back):
        assert b.dtype == a.dtype and np.array_equal(a, b)
    out = [np.full(a.shape, 7, a.dtype) for a in arrays]
    assert plan.unpack(out) is out
    assert all(np.array_equal(a, o) for a, o in zip(arrays, out))
    plan.pack([-a for a in arrays])  # the same buffers, reused
    assert all(b is plan.buffer(k) for k, b in enumerate(buffers))
    assert all(np.array_equal(-a, b) for a, b in zip(arrays, plan.unpack()))


@PROPERTY
@given(array_lists(), st.integers(1, 400), st.data())
def test_packing_one_bucket_touches_only_its_arrays(arrays, limit, data):
    plan = Buckets(arrays, limit)
    if not len(plan):
        return
    plan.pack(arrays)
    k = data.draw(st.integers(0, len(plan) - 1))
    plan.pack([a * 3 for a in arrays], bucket=k)
    for i, a in enumerate(arrays):
        factor = 3 if plan.slots[i].bucket == k else 1
        assert np.array_equal(plan.view(i), a * factor)


def test_non_contiguous_arrays_pack_and_unpack_in_place():
    base = np.arange(24.0).reshape(4, 6)
    arrays = [base.T, base[:, ::2]]
    plan = Buckets(arrays, 1 << 10)
    plan.pack(arrays)
    out = [np.zeros((4, 6)).T, np.zeros((4, 3))]  # a transposed output too
    plan.unpack(out)
    assert np.array_equal(out[0], base.T) and np.array_equal(out[1], base[:, ::2])


def test_arguments_are_checked():
    with pytest.raises(CommError, match="positive integer"):
        Buckets([np.ones(2)], 0)
    plan = Buckets([np.ones(2), np.ones(3, np.float32)], 64)
    with pytest.raises(CommError, match="the plan has 2 arrays, got 1"):
        plan.pack([np.ones(2)])
    with pytest.raises(CommError, match=r"array 1 is \(3,\) float64, the plan has \(3,\) float32"):
        plan.pack([np.ones(2), np.ones(3)])
    with pytest.raises(CommError, match=r"array 0 is \(2, 1\)"):
        plan.unpack([np.ones((2, 1)), np.ones(3, np.float32)])


def test_no_arrays_no_buckets():
    plan = Buckets([], 8)
    assert len(plan) == 0 and plan.unpack() == []


def test_a_buffer_is_allocated_only_when_first_used():
    arrays = [np.ones(3, np.float32), np.ones(100, np.float32)]
    plan = Buckets(arrays, 20)
    assert plan.members == [[0], [1]] and plan.allocated_bytes() == 0
    assert plan.view(0).shape == (3,) and plan.allocated_bytes() == 12  # not the big one's 400
    first = plan.buffer(1)
    assert first.shape == (100,) and plan.buffer(1) is first and plan.allocated_bytes() == 412


def test_buckets_into_one_dtype_widen_what_they_pack():
    """16-bit gradients packed into fp32 buckets: one dtype, exact values, a 16-bit array of the
    wrong shape still refused."""
    arrays = [np.linspace(-2, 2, 6).astype(np.float16).reshape(2, 3),
              np.arange(4, dtype=np.float16), np.float16([0.1])]
    plan = Buckets(arrays, 64, into=np.float32)  # 11 elements, 44 bytes in fp32
    assert set(plan.dtypes) == {np.dtype(np.float32)} and len(plan) == 1
    plan.pack(arrays)
    for i, a in enumerate(arrays):
        view = plan.view(i)
        assert view.dtype == np.float32
        np.testing.assert_array_equal(view, a.astype(np.float32))
    with pytest.raises(CommError, match="array 1 is"):
        plan.pack([arrays[0], np.zeros(5, np.float16), arrays[2]])
