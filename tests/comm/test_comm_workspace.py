"""The collectives' scratch pool: buffers come back for reuse, per dtype, smallest fit first."""

import numpy as np

from scratchpar.comm.workspace import Workspace


def test_a_returned_buffer_is_reused():
    pool, like = Workspace(), np.zeros(1, np.float32)
    first = pool.take(like, 100)
    assert first.shape == (100,) and first.dtype == np.float32
    pool.give(first)
    again = pool.take(like, 60)
    assert again.shape == (60,) and np.shares_memory(again, first)


def test_the_smallest_fitting_buffer_is_chosen_and_busy_ones_are_not():
    pool, like = Workspace(), np.zeros(1)
    big, small = pool.take(like, 1000), pool.take(like, 10)
    held = pool.take(like, 10)
    assert not np.shares_memory(held, small)  # small is still out: a new buffer
    pool.give(big)
    pool.give(small)
    got = pool.take(like, 8)
    assert np.shares_memory(got, small) and not np.shares_memory(got, big)
    assert np.shares_memory(pool.take(like, 500), big)


def test_dtypes_never_share_a_buffer():
    pool = Workspace()
    pool.give(pool.take(np.zeros(1, np.float64), 50))
    other = pool.take(np.zeros(1, np.float32), 50)
    assert other.dtype == np.float32
    assert pool.take(np.zeros(1, np.float64), 50).dtype == np.float64
