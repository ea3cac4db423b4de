"""The collectives' scratch pool: large buffers come back for reuse, per dtype, smallest fit
first; small ones come straight from the allocator."""

import numpy as np

from scratchpar.comm.workspace import POOLED_BYTES, Workspace

K = POOLED_BYTES // 8  # float64 elements in the smallest pooled buffer


def test_a_returned_buffer_is_reused():
    pool, like = Workspace(), np.zeros(1, np.float32)
    first = pool.take(like, 4 * K)
    assert first.shape == (4 * K,) and first.dtype == np.float32
    pool.give(first)
    again = pool.take(like, 3 * K)
    assert again.shape == (3 * K,) and np.shares_memory(again, first)


def test_the_smallest_fitting_buffer_is_chosen_and_busy_ones_are_not():
    pool, like = Workspace(), np.zeros(1)
    big, small = pool.take(like, 100 * K), pool.take(like, 2 * K)
    held = pool.take(like, 2 * K)
    assert not np.shares_memory(held, small)  # small is still out: a new buffer
    pool.give(big)
    pool.give(small)
    got = pool.take(like, K)
    assert np.shares_memory(got, small) and not np.shares_memory(got, big)
    assert np.shares_memory(pool.take(like, 50 * K), big)


def test_dtypes_never_share_a_buffer():
    pool = Workspace()
    pool.give(pool.take(np.zeros(1, np.float64), 2 * K))
    other = pool.take(np.zeros(1, np.float32), 2 * K)
    assert other.dtype == np.float32
    assert pool.take(np.zeros(1, np.float64), 2 * K).dtype == np.float64


def test_small_buffers_are_not_kept():
    pool, like = Workspace(), np.zeros(1)
    small = pool.take(like, K // 2)
    pool.give(small)
    assert not np.shares_memory(pool.take(like, K // 2), small)
