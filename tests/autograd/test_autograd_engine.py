"""The backward pass itself: accumulation, graph shapes, no_grad, leaf ownership, Function API."""

import numpy as np
import pytest
from autograd_helpers import PROPERTY, leaf, normal, seeds, shapes
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.autograd import Function, Tensor, grad_check, is_grad_enabled, no_grad
from scratchpar.autograd import functional as F


def small_model(x, w):
    """A graph with reuse, broadcasting and a reduction: a fixed target for the tests below."""
    h = F.tanh(x @ w)  # (N, K)
    return (h * h + F.sigmoid(h) * x.sum(axis=1, keepdims=True)).mean()


@PROPERTY
@given(n=st.integers(1, 4), d=st.integers(1, 4), k=st.integers(1, 4), seed=seeds)
def test_backward_twice_doubles_and_zeroing_restores_bitwise(n, d, k, seed):
    rng = np.random.default_rng(seed)
    x, w = normal(rng, (n, d)), normal(rng, (d, k))
    loss = small_model(x, w)
    loss.backward()
    first_x, first_w = host(x.grad).copy(), host(w.grad).copy()
    loss.backward()  # the graph is kept: a second pass adds the same gradient again
    np.testing.assert_array_equal(host(x.grad), 2 * first_x)
    np.testing.assert_array_equal(host(w.grad), 2 * first_w)
    x.grad = w.grad = None
    small_model(x, w).backward()  # a fresh graph after zeroing: bitwise the same
    np.testing.assert_array_equal(host(x.grad), first_x)
    np.testing.assert_array_equal(host(w.grad), first_w)
    grad_check(small_model, [x, w])


def test_accumulation_adds_across_different_losses():
    rng = np.random.default_rng(0)
    x = normal(rng, (3,))
    (x * 2.0).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(host(x.grad), 2.0 + 2.0 * host(x.data), rtol=1e-15)


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_tensor_used_twice_gets_the_summed_gradient(shape, seed):
    x = normal(np.random.default_rng(seed), shape)
    ones = np.ones(shape)
    (x * x).backward(ones)
    np.testing.assert_allclose(host(x.grad), 2.0 * host(x.data), rtol=1e-15)
    x.grad = None
    (x + x).backward(ones)
    np.testing.assert_array_equal(host(x.grad), 2.0 * ones)
    x.grad = None
    (x - x).backward(ones)
    np.testing.assert_array_equal(host(x.grad), np.zeros(shape))
    grad_check(lambda t: t * t * t + t, [x])


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_diamond_graph(shape, seed):
    """x → (a, b) → c: both paths reach x, each once."""
    x = normal(np.random.default_rng(seed), shape)
    a = x * 2.0
    b = F.exp(x)
    c = a * b
    c.backward(np.ones(shape))
    x0 = host(x.data)
    np.testing.assert_allclose(host(x.grad), 2.0 * np.exp(x0) * (1.0 + x0), rtol=1e-13, atol=1e-14)
    grad_check(lambda t: (t * 2.0) * F.exp(t), [x])


def test_deep_chain_does_not_recurse():
    x = leaf(np.array([0.5]))
    y = x
    for _ in range(5000):  # far beyond Python's recursion limit
        y = y * 1.0001
    y.backward(np.ones(1))
    np.testing.assert_allclose(host(x.grad), [1.0001**5000], rtol=1e-10)


def test_wide_fan_in_each_path_counted_once():
    x = leaf(np.array([1.0, 2.0]))
    h = x * 3.0
    total = h
    for _ in range(99):
        total = total + h
    total.backward(np.ones(2))
    np.testing.assert_array_equal(host(x.grad), [300.0, 300.0])


@PROPERTY
@given(shape=shapes(), seed=seeds,
       op=st.sampled_from(["add", "sub", "reshape", "sum", "mean", "concat", "root"]))
def test_leaves_never_share_a_grad_array(shape, seed, op):
    rng = np.random.default_rng(seed)
    x, y = normal(rng, shape), normal(rng, shape)
    ones = np.ones(shape)
    if op == "add":
        (x + y).backward(ones)
    elif op == "sub":
        (x - y).backward(ones)
    elif op == "reshape":
        (x.reshape(-1) + y.reshape(-1)).backward(ones.reshape(-1))
    elif op == "sum":
        (x + y).sum().backward()
    elif op == "mean":
        F.mean(x + y).backward()
    elif op == "concat":
        F.concat([x.reshape(1, -1), y.reshape(1, -1)], axis=0).backward(np.ones((2, x.size)))
    else:
        seed_grad = np.ones(shape)
        x.backward(seed_grad)
        (y * 1.0).backward(seed_grad)
        seed_grad[...] = 7.0  # the caller's array is not aliased either
        assert (host(x.grad) != 7.0).all()
    gx, gy = x.grad, y.grad
    assert gx is not gy and isinstance(gx, type(x.data))  # an array, never a scalar
    before = host(gy).copy()
    gx += 5.0  # an optimizer modifies a gradient in place: a read-only one would raise
    np.testing.assert_array_equal(host(gy), before)  # and its neighbour's stays as it was


def test_constants_and_non_grad_tensors_get_no_grad():
    rng = np.random.default_rng(1)
    x, c = normal(rng, (2, 2)), Tensor(on_device(rng.standard_normal((2, 2))))
    (x * c + c).sum().backward()
    assert c.grad is None and c.is_leaf and not c.requires_grad
    np.testing.assert_array_equal(host(x.grad), host(c.data))


def test_no_grad_records_no_graph():
    x = normal(np.random.default_rng(2), (3,))
    assert is_grad_enabled()
    with no_grad():
        assert not is_grad_enabled()
        y = F.exp(x * 2.0).sum()
        with no_grad():
            pass
        assert not is_grad_enabled()  # a nested block restores the outer state
    assert is_grad_enabled()
    assert not y.requires_grad and y.is_leaf
    np.testing.assert_allclose(host(y.data), np.exp(2.0 * host(x.data)).sum(), rtol=1e-15)
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.backward()
    assert x.grad is None
    z = (x * 2.0).sum()
    assert z.requires_grad and not z.is_leaf


def test_no_grad_restores_on_exception():
    with pytest.raises(KeyError), no_grad():
        raise KeyError("boom")
    assert is_grad_enabled()


def test_backward_errors():
    x = normal(np.random.default_rng(3), (2, 3))
    y = x * 2.0
    with pytest.raises(RuntimeError, match="non-scalar"):
        y.backward()
    with pytest.raises(ValueError, match="grad of shape"):
        y.backward(np.ones((3, 2)))
    with pytest.raises(TypeError):
        Tensor(x)
    y.sum().backward()  # a one-element output needs no explicit grad
    np.testing.assert_array_equal(host(x.grad), np.full((2, 3), 2.0))


def test_detach_cuts_the_graph():
    x = normal(np.random.default_rng(4), (3,))
    y = x.detach() * x
    assert not x.detach().requires_grad and x.detach().data is x.data
    y.backward(np.ones(3))
    # only the attached factor is differentiated
    np.testing.assert_array_equal(host(x.grad), host(x.data))


class Cube(Function):
    """x³ with an optional (scale) second input that needs no gradient."""

    seen_needs = []

    @staticmethod
    def forward(ctx, x, scale):
        Cube.seen_needs.append(ctx.needs_input_grad)
        ctx.x, ctx.scale = x, scale
        return scale * x**3

    @staticmethod
    def backward(ctx, g):
        return 3.0 * ctx.scale * ctx.x**2 * g, None


class WrongSquare(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return x * x

    @staticmethod
    def backward(ctx, g):
        return g * ctx.x  # missing the factor 2


def test_custom_function_and_grad_check_catches_a_wrong_backward():
    Cube.seen_needs.clear()
    x = normal(np.random.default_rng(5), (4,))
    grad_check(lambda t: Cube.apply(t, 2.0), [x])
    assert Cube.seen_needs[0] == (True, False)
    with no_grad():
        assert not Cube.apply(x, 2.0).requires_grad
    const = Cube.apply(Tensor(x.data), 2.0)
    assert not const.requires_grad and const.is_leaf
    with pytest.raises(AssertionError, match="differ"):
        grad_check(WrongSquare.apply, [x])


def test_grad_check_requires_float64():
    with pytest.raises(ValueError, match="float64"):
        grad_check(F.exp, [Tensor(on_device(np.ones(2), np.float32), requires_grad=True)])
