"""DeviceRandom: one counter-based stream, the same bits on every device, saved as two integers."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar import double
from scratchpar.device_rng import DeviceRandom


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), sizes=st.lists(st.integers(0, 50), min_size=1, max_size=4))
def test_draws_continue_one_stream_and_match_across_devices(seed, sizes):
    whole = DeviceRandom(seed, 1).random((sum(sizes),))
    gen = DeviceRandom(seed, 1)
    parts = [double.asnumpy(gen.random((n,), double)) for n in sizes]
    np.testing.assert_array_equal(np.concatenate(parts), whole)  # bit for bit, on the double
    assert gen.state["position"] == sum(sizes)


def test_a_restored_state_resumes_the_stream():
    gen = DeviceRandom(7, 1, 3)
    gen.random((10,))
    saved = gen.state
    later = gen.random((4, 5))
    fresh = DeviceRandom(0)
    fresh.state = saved
    np.testing.assert_array_equal(fresh.random((4, 5)), later)


def test_streams_of_different_ranks_differ_and_values_are_uniform():
    a, b = DeviceRandom(1, 1, 0).random((200_000,)), DeviceRandom(1, 1, 1).random((200_000,))
    assert not np.array_equal(a[:100], b[:100])
    for u in (a, b):
        assert 0.0 <= u.min() and u.max() < 1.0
        assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002  # ≈ 7 σ
        counts = np.bincount((u * 20).astype(int), minlength=20)
        chi2 = ((counts - len(u) / 20) ** 2 / (len(u) / 20)).sum()
        assert chi2 < 60  # 19 degrees of freedom: p < 1e-5 beyond this


@pytest.mark.parametrize("state", [
    None, [], {"key": 1}, {"key": 1, "position": 0, "x": 2}, {"key": -1, "position": 0},
    {"key": 2**64, "position": 0}, {"key": 1, "position": True}, {"key": 1.0, "position": 0},
])
def test_a_malformed_state_is_refused(state):
    gen = DeviceRandom(0)
    with pytest.raises(ValueError, match="random stream"):
        gen.state = state
    assert gen.state["position"] == 0


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(1, 60), pick=st.integers(0, 59))
def test_a_mask_is_the_draw_compared_without_its_floats(seed, n, pick):
    """``keep`` tests the 53 bits against ⌈p·2⁵³⌉: the same verdicts as ``random() >= p``, at
    a p equal to one of the draws too, on every device, the stream moved alike."""
    u = DeviceRandom(seed, 2).random((n,))
    for p in (u[pick % n], np.nextafter(u[pick % n], 1.0), 0.5, 0.0):
        gen = DeviceRandom(seed, 2)
        np.testing.assert_array_equal(gen.keep((n,), p), u >= p)
        np.testing.assert_array_equal(double.asnumpy(DeviceRandom(seed, 2).keep((n,), p, double)),
                                      u >= p)
        assert gen.state["position"] == n


def test_a_stream_counted_from_an_origin_in_device_memory_draws_the_same_mask():
    """A replayed graph's stream: positions count from an origin the device holds, so the host
    moves it between replays without touching a kernel's arguments."""
    whole = DeviceRandom(3, 1)
    whole.position = 2**64 - 40  # the sum wraps as the counter does
    want = whole.keep((8, 10), 0.4)
    gen = DeviceRandom(3, 1)
    gen.origin, gen.position = double.asarray(np.uint64(2**64 - 50)), 10
    np.testing.assert_array_equal(double.asnumpy(gen.keep((8, 10), 0.4, double)), want)
    assert gen.position == 90
