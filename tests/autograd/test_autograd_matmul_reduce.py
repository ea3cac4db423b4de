"""Batched matmul with broadcast batch dims, and sum/mean/max over random axis subsets."""

import numpy as np
import pytest
from autograd_helpers import PROPERTY, broadcast_pair, distinct, leaf, normal, seeds, shapes
from device_helpers import host
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.autograd import functional as F
from scratchpar.autograd import grad_check

sides = st.integers(1, 3)


@PROPERTY
@given(batch=broadcast_pair(max_dims=2), m=sides, k=sides, n=sides, seed=seeds)
def test_batched_matmul_broadcasts_batch_dims(batch, m, k, n, seed):
    rng = np.random.default_rng(seed)
    a, b = normal(rng, batch[0] + (m, k)), normal(rng, batch[1] + (k, n))
    out = a @ b
    assert out.shape == np.broadcast_shapes(*batch) + (m, n)
    np.testing.assert_allclose(host(out.data), np.matmul(host(a.data), host(b.data)), rtol=1e-13)
    grad_check(F.matmul, [a, b])


@PROPERTY
@given(lead=shapes(min_dims=0, max_dims=2), m=sides, k=sides, n=sides, seed=seeds,
       batched_left=st.booleans())
def test_matmul_batched_with_plain_matrix(lead, m, k, n, seed, batched_left):
    """(..., M, K) @ (K, N) folds the batch into one product; (M, K) @ (..., K, N) too."""
    rng = np.random.default_rng(seed)
    if batched_left:
        a, b = normal(rng, lead + (m, k)), normal(rng, (k, n))
    else:
        a, b = normal(rng, (m, k)), normal(rng, lead + (k, n))
    np.testing.assert_allclose(host((a @ b).data), host(a.data) @ host(b.data), rtol=1e-13)
    grad_check(F.matmul, [a, b])


def test_matmul_grads_by_hand():
    a = leaf([[1.0, 2.0], [3.0, 4.0]])
    b = leaf([[5.0], [6.0]])
    (a @ b).backward(np.array([[1.0], [-1.0]]))
    np.testing.assert_array_equal(host(a.grad), [[5.0, 6.0], [-5.0, -6.0]])  # g·bᵀ
    np.testing.assert_array_equal(host(b.grad), [[-2.0], [-2.0]])  # aᵀ·g


def test_matmul_rejects_vectors():
    with pytest.raises(ValueError, match="2\\+ dims"):
        F.matmul(leaf(np.ones(3)), leaf(np.ones((3, 2))))


@st.composite
def axis_case(draw):
    """A shape and an ``axis`` argument: None, an int or a tuple, negative axes included."""
    shape = draw(shapes(min_dims=1, max_dims=4))
    ndim = len(shape)
    form = draw(st.sampled_from(("none", "int", "tuple")))
    if form == "none":
        return shape, None
    if form == "int":
        return shape, draw(st.integers(-ndim, ndim - 1))
    axes = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return shape, tuple(ax - ndim if draw(st.booleans()) else ax for ax in axes)


REDUCTIONS = {"sum": (F.sum, np.sum), "mean": (F.mean, np.mean), "max": (F.max, np.max)}


@PROPERTY
@given(name=st.sampled_from(sorted(REDUCTIONS)), case=axis_case(), keepdims=st.booleans(),
       seed=seeds)
def test_reduction_over_axis_subsets(name, case, keepdims, seed):
    shape, axis = case
    op, reference = REDUCTIONS[name]
    x = distinct(np.random.default_rng(seed), shape)  # no ties, so max is differentiable

    def fn(t):
        return op(t, axis=axis, keepdims=keepdims)

    out = fn(x)
    expected = reference(host(x.data), axis=axis, keepdims=keepdims)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(host(out.data), expected, rtol=1e-13)
    grad_check(fn, [x])


@PROPERTY
@given(case=axis_case(), keepdims=st.booleans(), seed=seeds)
def test_reduction_methods_match_functional(case, keepdims, seed):
    shape, axis = case
    x = normal(np.random.default_rng(seed), shape)
    for name, (op, _) in REDUCTIONS.items():
        method = getattr(x, name)(axis=axis, keepdims=keepdims)
        functional = op(x, axis=axis, keepdims=keepdims)
        np.testing.assert_array_equal(host(method.data), host(functional.data))


@PROPERTY
@given(shape=shapes(min_dims=1), seed=seeds)
def test_mean_grad_is_one_over_count(shape, seed):
    x = normal(np.random.default_rng(seed), shape)
    F.mean(x, axis=0).backward(np.ones(shape[1:]))
    np.testing.assert_allclose(host(x.grad), np.full(shape, 1.0 / shape[0]), rtol=1e-15)


def test_max_ties_split_the_gradient_equally():
    x = leaf([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0], [0.0, -1.0, -2.0, -3.0]])
    x.max(axis=1).backward(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(host(x.grad), [[0.0, 0.5, 0.5, 0.0], [0.5, 0.5, 0.5, 0.5],
                                              [3.0, 0.0, 0.0, 0.0]], rtol=1e-15)


@PROPERTY
@given(shape=shapes(min_dims=1, max_dims=3), seed=seeds, keepdims=st.booleans())
def test_max_ties_over_all_axes_share_the_gradient(shape, seed, keepdims):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 3, size=shape).astype(np.float64)  # many ties
    x = leaf(data)
    F.max(x, keepdims=keepdims).backward(np.full((1,) * len(shape) if keepdims else (), 6.0))
    winners = data == data.max()
    np.testing.assert_allclose(host(x.grad), 6.0 * winners / winners.sum(), rtol=1e-14)
    assert host(x.grad).sum() == pytest.approx(6.0, rel=1e-14)


@pytest.mark.parametrize("sa, sb", [((1, 2), (2, 0)), ((0, 2), (2, 3)), ((3, 0), (0, 2)),
                                    ((2, 3, 4), (4, 0))])
def test_matmul_with_an_empty_dimension(sa, sb):
    """An empty shard (a tensor-parallel rank with no columns) still has zero-shaped gradients."""
    a, b = leaf(np.ones(sa)), leaf(np.ones(sb))
    (a @ b).sum().backward()
    assert a.grad.shape == sa and b.grad.shape == sb
    assert not a.grad.any() and not b.grad.any()


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_a_reduction_s_gradient_keeps_a_float32_input_s_dtype(name):
    """A float32 reduction's gradient is float32: a wider one would widen every gradient
    upstream of it (a router's, through its log-sum-exp's max) and the buckets summing them."""
    from scratchpar.autograd import Tensor
    x = Tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32),
               requires_grad=True)
    getattr(F, name)(x, axis=-1).sum().backward()
    assert x.grad.dtype == np.float32
