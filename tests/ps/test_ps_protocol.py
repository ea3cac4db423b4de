"""The parameter servers' header survives its float64 message, and a clock's pushes combine into
one device's mean gradient over the global batch (and one worker's push into itself, bitwise)."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.parallel.ps.protocol import ACQUIRE, LEAVE, STEP, Header, weighted_mean

counts = st.integers(0, 2**40)  # exact in a float64


@given(kind=st.sampled_from((STEP, ACQUIRE, LEAVE)), clock=counts, pushes=counts,
       mean=st.floats(allow_nan=False), units=st.floats(0, 1e9), lr=st.floats(0, 10),
       norm=st.floats(0, 1e30), grad=st.booleans(), pull=st.booleans())
def test_a_header_round_trips_through_its_buffer(kind, clock, pushes, mean, units, lr, norm,
                                                 grad, pull):
    header = Header(kind, clock, mean, units, lr, norm, grad, pull, pushes)
    packed = header.pack()
    assert packed.dtype == np.float64 and packed.shape == Header.buffer().shape
    assert Header.unpack(packed) == header


@given(rows=st.lists(st.integers(0, 5), min_size=1, max_size=4), seed=st.integers(0, 2**31))
def test_pushes_combine_into_the_global_batchs_mean_gradient(rows, seed):
    """Worker w's mean gradient over its n_w rows, weighed by n_w/N: the mean over all N rows."""
    gen = np.random.default_rng(seed)
    per_row = [gen.standard_normal((n, 3)) for n in rows]  # each row's gradient, (n_w, 3)
    means = [g.mean(0) if len(g) else np.zeros(3) for g in per_row]
    losses = [float(g.sum()) / max(len(g), 1) for g in per_row]
    grad, loss = weighted_mean(means, losses, [float(n) for n in rows])
    if sum(rows) == 0:
        assert not np.any(grad) and loss == 0.0
        return
    everything = np.concatenate(per_row)
    np.testing.assert_allclose(grad, everything.mean(0), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(loss, everything.sum() / len(everything), rtol=1e-12, atol=1e-15)


@given(seed=st.integers(0, 2**31), n=st.integers(1, 100))
def test_one_workers_push_is_its_own_gradient_bitwise(seed, n):
    g = np.random.default_rng(seed).standard_normal(7)
    grad, loss = weighted_mean([g], [0.375], [float(n)])
    assert np.array_equal(grad, g) and loss == 0.375
