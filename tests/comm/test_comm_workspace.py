"""The collectives' scratch pool: large buffers come back for reuse, per dtype, smallest fit
first; small ones come straight from the allocator. Pinned staging buffers: all pooled, lent
once, and kept from receives while a copy to the device may still read them."""

import numpy as np

from scratchpar.comm.workspace import MAX_SETTLING, PINNED_MIN_BYTES, POOLED_BYTES, Workspace
from scratchpar.double import watch

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


def test_a_pinned_buffer_is_lent_once_and_then_serves_any_dtype():
    pool = Workspace()
    host, whole = pool.take_pinned((3, 5), np.float64)
    assert host.shape == (3, 5) and host.dtype == np.float64 and np.shares_memory(host, whole)
    other, _ = pool.take_pinned((3, 5), np.float64)
    assert not np.shares_memory(other, host)  # the first is still lent
    pool.give_pinned(whole)
    again, same = pool.take_pinned((100,), np.int32)
    assert same is whole and again.dtype == np.int32 and np.shares_memory(again, host)


def test_pinned_buffers_come_in_powers_of_two_and_the_smallest_fit_is_lent():
    pool = Workspace()
    (_, big), (_, small) = pool.take_pinned((5000,), np.uint8), pool.take_pinned((1,), np.uint8)
    assert (big.nbytes, small.nbytes) == (8192, PINNED_MIN_BYTES)
    pool.give_pinned(big)
    pool.give_pinned(small)
    assert pool.take_pinned((PINNED_MIN_BYTES // 8,), np.float64)[1] is small
    assert pool.take_pinned((0, 3), np.float32)[1] is big  # empty messages borrow too


def test_pinned_buffers_are_pinned_where_there_is_a_device(device):
    with watch() as seen:
        host, whole = Workspace().take_pinned((10,), np.float32)
    if device == "double":
        assert getattr(host, "pinned", False) and seen.pinned_bytes == whole.nbytes


def test_a_settling_buffer_serves_a_send_but_a_receive_only_once_settled():
    pool = Workspace()
    _, whole = pool.take_pinned((8,), np.float64)
    pool.give_pinned(whole, settling=True)  # a copy to the device may still read it
    _, fresh = pool.take_pinned((8,), np.float64, settled=True)
    assert fresh is not whole
    assert pool.take_pinned((8,), np.float64)[1] is whole  # a send's copy queues behind it
    pool.give_pinned(whole, settling=True)
    pool.settle()
    assert pool.take_pinned((8,), np.float64, settled=True)[1] is whole


def test_a_receive_among_many_settling_buffers_synchronizes_rather_than_allocate(device):
    pool = Workspace()
    lent = [pool.take_pinned((8,), np.float64)[1] for _ in range(MAX_SETTLING)]
    for whole in lent:
        pool.give_pinned(whole, settling=True)
    with watch() as seen:
        _, whole = pool.take_pinned((8,), np.float64, settled=True)
    assert any(whole is b for b in lent) and seen.pinned_bytes == 0
    if device == "double":
        assert [s.split(" at ")[0] for s in seen.syncs] == ["synchronize"]
