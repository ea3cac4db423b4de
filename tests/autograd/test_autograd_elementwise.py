"""Elementwise ops against grad_check and NumPy, over broadcasting shape pairs and 0-d arrays."""

import numpy as np
import pytest
from autograd_helpers import (
    PROPERTY,
    away_from_zero,
    broadcast_pair,
    leaf,
    normal,
    positive,
    seeds,
    shapes,
)
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.autograd import Tensor, grad_check
from scratchpar.autograd import functional as F

BINARY = {
    "add": (F.add, np.add),
    "sub": (F.sub, np.subtract),
    "mul": (F.mul, np.multiply),
    "div": (F.div, np.divide),
    "pow": (F.pow, np.power),
}


def binary_operands(name, rng, shape_a, shape_b):
    """Operands where the op is smooth: divisors away from 0, positive bases for pow."""
    if name == "pow":
        return positive(rng, shape_a), leaf(rng.uniform(-2.0, 2.0, shape_b))
    if name == "div":
        return normal(rng, shape_a), away_from_zero(rng, shape_b, 0.5, 2.0)
    return normal(rng, shape_a), normal(rng, shape_b)


@PROPERTY
@given(name=st.sampled_from(sorted(BINARY)), pair=broadcast_pair(), seed=seeds)
def test_binary_op_grads_broadcast(name, pair, seed):
    op, reference = BINARY[name]
    a, b = binary_operands(name, np.random.default_rng(seed), *pair)
    out = op(a, b)
    assert out.shape == np.broadcast_shapes(*pair)
    np.testing.assert_allclose(host(out.data), reference(host(a.data), host(b.data)), rtol=1e-14)
    grad_check(op, [a, b])
    assert a.grad.shape == a.shape and b.grad.shape == b.shape


@PROPERTY
@given(name=st.sampled_from(sorted(BINARY)), pair=broadcast_pair(), seed=seeds)
def test_binary_grad_reaches_only_operands_that_require_it(name, pair, seed):
    op = BINARY[name][0]
    a, b = binary_operands(name, np.random.default_rng(seed), *pair)
    const_b, const_a = Tensor(b.data.copy()), Tensor(a.data.copy())  # no requires_grad
    grad_check(lambda x: op(x, const_b), [a])
    grad_check(lambda y: op(const_a, y), [b])
    assert const_a.grad is None and const_b.grad is None
    out = op(const_a, const_b)
    assert not out.requires_grad and out.is_leaf


OPERATORS = {
    "+": (lambda a, b: a + b, np.add),
    "-": (lambda a, b: a - b, np.subtract),
    "*": (lambda a, b: a * b, np.multiply),
    "/": (lambda a, b: a / b, np.divide),
    "**": (lambda a, b: a**b, np.power),
}


@PROPERTY
@given(symbol=st.sampled_from(sorted(OPERATORS)), shape=shapes(), seed=seeds,
       constant=st.floats(0.5, 2.0), tensor_on_left=st.booleans(), as_array=st.booleans())
def test_operators_with_constants_on_either_side(symbol, shape, seed, constant, tensor_on_left,
                                                 as_array):
    """``x ⊕ c`` and ``c ⊕ x`` for a Python float or an ndarray ``c`` (reflected operators)."""
    op, reference = OPERATORS[symbol]
    x = positive(np.random.default_rng(seed), shape)
    c = np.full(shape, constant) if as_array else constant
    operand = on_device(c) if as_array else c
    fn = (lambda t: op(t, operand)) if tensor_on_left else (lambda t: op(operand, t))
    out = fn(x)
    assert isinstance(out, Tensor)
    expected = reference(host(x.data), c) if tensor_on_left else reference(c, host(x.data))
    np.testing.assert_allclose(host(out.data), expected, rtol=1e-14)
    grad_check(fn, [x])


@PROPERTY
@given(shape=shapes(), seed=seeds, exponent=st.sampled_from([1, 2, 3, -1, -2, 0.5]))
def test_pow_constant_exponent_matches_power_rule(shape, seed, exponent):
    rng = np.random.default_rng(seed)
    x = away_from_zero(rng, shape, 0.5, 2.0) if exponent == int(exponent) else positive(rng, shape)
    grad_check(lambda t: t**exponent, [x])
    x.grad = None
    (x**exponent).backward(np.ones(shape))
    np.testing.assert_allclose(host(x.grad), exponent * host(x.data) ** (exponent - 1),
                               rtol=1e-12)


UNARY = {
    "neg": (F.neg, np.negative, normal),
    "exp": (F.exp, np.exp, normal),
    "log": (F.log, np.log, positive),
    "tanh": (F.tanh, np.tanh, normal),
    "sigmoid": (F.sigmoid, lambda x: 1.0 / (1.0 + np.exp(-x)), normal),
    "relu": (F.relu, lambda x: np.maximum(x, 0.0), away_from_zero),
    "gelu": (F.gelu, lambda x: 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi)
                                                         * (x + 0.044715 * x**3))), normal),
}


@PROPERTY
@given(name=st.sampled_from(sorted(UNARY)), shape=shapes(), seed=seeds)
def test_unary_op_grads(name, shape, seed):
    op, reference, draw = UNARY[name]
    x = draw(np.random.default_rng(seed), shape)
    out = op(x)
    assert out.shape == shape
    np.testing.assert_allclose(host(out.data), reference(host(x.data)), rtol=1e-12, atol=1e-15)
    grad_check(op, [x])


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sigmoid", "relu", "gelu"])
def test_tensor_methods_equal_functional(name):
    x = positive(np.random.default_rng(1), (3, 2))
    np.testing.assert_array_equal(host(getattr(x, name)().data), host(UNARY[name][0](x).data))


def test_neg_operator_and_method_grads():
    x = normal(np.random.default_rng(2), (2, 3))
    (-x).backward(np.ones((2, 3)))
    np.testing.assert_array_equal(host(x.grad), -np.ones((2, 3)))


def test_sigmoid_tanh_gelu_stay_finite_at_large_magnitude():
    x = leaf(np.array([-1e3, -50.0, 0.0, 50.0, 1e3]))
    with np.errstate(all="raise"):
        for op in (F.sigmoid, F.tanh, F.gelu):
            out = op(x)
            out.backward(np.ones(5))
            assert np.isfinite(host(out.data)).all() and np.isfinite(host(x.grad)).all()
            x.grad = None
    np.testing.assert_allclose(host(F.sigmoid(x).data), [0.0, 0.0, 0.5, 1.0, 1.0], atol=1e-15)
    np.testing.assert_allclose(host(F.gelu(x).data), [0.0, 0.0, 0.0, 50.0, 1e3], atol=1e-12)


def test_relu_grad_is_the_step_function():
    x = leaf(np.array([-2.0, -0.5, 0.5, 3.0]))
    F.relu(x).backward(np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(host(x.grad), [0.0, 0.0, 3.0, 4.0])
