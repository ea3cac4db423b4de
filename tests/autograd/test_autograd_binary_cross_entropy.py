"""Binary cross-entropy with logits: the naive formula's value, grad_check, stability, reduction."""

import numpy as np
import pytest
from autograd_helpers import PROPERTY, leaf, seeds, shapes
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.autograd import Tensor, grad_check
from scratchpar.autograd import functional as F


def naive(z, y):
    """−[y log σ(z) + (1−y) log(1−σ(z))], as written (fine for moderate z)."""
    p = 1.0 / (1.0 + np.exp(-z))
    return -(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def targets(rng, shape, soft: bool):
    """Soft targets in [0, 1], or int64 labels in {0, 1}."""
    return rng.random(shape) if soft else rng.integers(0, 2, size=shape)


@PROPERTY
@given(shape=shapes(min_dims=1, max_dims=2, max_side=5), soft=st.booleans(),
       reduction=st.sampled_from(["mean", "sum"]), seed=seeds)
def test_value_and_grad_check(shape, soft, reduction, seed):
    rng = np.random.default_rng(seed)
    z = leaf(3 * rng.standard_normal(shape))
    y = targets(rng, shape, soft)
    loss = F.binary_cross_entropy_with_logits(z, on_device(y), reduction)
    want = naive(host(z.data), y)
    want = want.mean() if reduction == "mean" else want.sum()
    assert loss.shape == () and loss.dtype == np.float64
    np.testing.assert_allclose(float(loss.item()), want, rtol=1e-12)
    grad_check(lambda t: F.binary_cross_entropy_with_logits(t, on_device(y), reduction), [z])


@PROPERTY
@given(n=st.integers(1, 8), seed=seeds)
def test_gradient_is_sigmoid_minus_target_over_n(n, seed):
    rng = np.random.default_rng(seed)
    z, y = leaf(rng.standard_normal(n)), rng.integers(0, 2, size=n)
    F.binary_cross_entropy_with_logits(z, on_device(y)).backward()
    np.testing.assert_allclose(host(z.grad), (1 / (1 + np.exp(-host(z.data))) - y) / n,
                               rtol=1e-12, atol=1e-15)


def test_stable_and_exact_at_large_magnitude():
    z = leaf([1e4, -1e4, 800.0, -800.0, 40.0])
    y = on_device(np.array([1, 0, 0, 1, 1]))
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        loss = F.binary_cross_entropy_with_logits(z, y, "sum")
        loss.backward()
    # confident and right: ~e^−|z|; confident and wrong: |z|
    assert float(loss.item()) == pytest.approx(800.0 + 800.0 + np.exp(-40.0), rel=1e-15)
    # σ(z) − y to within an ulp of 1: a saturated gradient is 0 or ±1
    np.testing.assert_allclose(host(z.grad), [0.0, 0.0, 1.0, -1.0, 0.0], rtol=0, atol=1e-15)


def test_float32_logits_keep_their_dtype_with_int_labels():
    z = Tensor(on_device(np.array([0.5, -2.0], dtype=np.float32)), requires_grad=True)
    loss = F.binary_cross_entropy_with_logits(z, on_device(np.array([1, 0])))
    loss.backward()
    assert loss.dtype == np.float32 and z.grad.dtype == np.float32


def test_no_entries_give_zero_loss_and_a_zero_gradient():
    z = leaf(np.zeros(0))
    loss = F.binary_cross_entropy_with_logits(z, on_device(np.zeros(0, dtype=np.int64)))
    loss.backward()
    assert float(loss.item()) == 0.0 and z.grad.shape == (0,)


def test_bad_reduction_and_mismatched_shapes_are_refused():
    z = leaf(np.zeros(3))
    with pytest.raises(ValueError, match="reduction"):
        F.binary_cross_entropy_with_logits(z, on_device(np.zeros(3)), "none")
    with pytest.raises(ValueError, match="shape"):
        F.binary_cross_entropy_with_logits(z, on_device(np.zeros((3, 1))))
