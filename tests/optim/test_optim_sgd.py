"""SGD against a hand-written NumPy reference, and against torch.optim.SGD where installed."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from optim_helpers import ON_XP, assert_matches_torch

from scratchpar.backend import to_host
from scratchpar.optim import SGD


def reference_sgd(theta, grads, lrs, momentum, weight_decay, nesterov):
    """Plain NumPy SGD in torch's convention, one step per (gradient, learning rate)."""
    theta = theta.copy()
    buf = None
    for g, lr in zip(grads, lrs, strict=True):
        g = g + weight_decay * theta
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + g
            g = g + momentum * buf if nesterov else buf
        theta = theta - lr * g
    return theta


configs = st.sampled_from(
    [(0.0, 0.0, False), (0.0, 0.1, False), (0.9, 0.0, False), (0.9, 0.05, False),
     (0.5, 0.0, True), (0.9, 0.01, True)]
)


@ON_XP
@given(
    config=configs,
    shape=st.lists(st.integers(1, 5), min_size=0, max_size=3).map(tuple),
    steps=st.integers(1, 5),
    seed=st.integers(0, 2**16),
)
def test_sgd_matches_reference(xp, config, shape, steps, seed):
    momentum, weight_decay, nesterov = config
    rng = np.random.default_rng(seed)
    theta0 = rng.standard_normal(shape)
    grads = [rng.standard_normal(shape) for _ in range(steps)]
    lrs = rng.uniform(0.01, 0.5, steps)  # a schedule: lr is read afresh on every step
    p = SimpleNamespace(data=xp.array(theta0), grad=None)
    opt = SGD([p], lr=lrs[0], momentum=momentum, weight_decay=weight_decay, nesterov=nesterov)
    for g, lr in zip(grads, lrs, strict=True):
        opt.lr = lr
        p.grad = xp.asarray(g)
        opt.step()
    expected = reference_sgd(theta0, grads, lrs, momentum, weight_decay, nesterov)
    np.testing.assert_allclose(to_host(p.data), expected, rtol=1e-12, atol=1e-13)
    assert opt.step_count == steps


def test_plain_sgd_first_step_by_hand(xp):
    p = SimpleNamespace(data=xp.asarray([1.0, -2.0]), grad=xp.asarray([0.5, 4.0]))
    SGD([p], lr=0.1).step()
    np.testing.assert_array_equal(to_host(p.data), [0.95, -2.4])


def test_momentum_two_steps_by_hand(xp):
    p = SimpleNamespace(data=xp.asarray([1.0]), grad=xp.asarray([1.0]))
    opt = SGD([p], lr=0.1, momentum=0.9)
    opt.step()  # b = 1, θ = 1 − 0.1
    np.testing.assert_allclose(to_host(p.data), [0.9])
    opt.step()  # b = 0.9·1 + 1 = 1.9, θ = 0.9 − 0.19
    np.testing.assert_allclose(to_host(p.data), [0.71])
    np.testing.assert_allclose(to_host(opt.state[0]["momentum_buffer"]), [1.9])


def test_nesterov_two_steps_by_hand(xp):
    p = SimpleNamespace(data=xp.asarray([1.0]), grad=xp.asarray([1.0]))
    opt = SGD([p], lr=0.1, momentum=0.5, nesterov=True)
    opt.step()  # b = 1, d = 1 + 0.5 = 1.5, θ = 1 − 0.15
    np.testing.assert_allclose(to_host(p.data), [0.85])
    opt.step()  # b = 1.5, d = 1 + 0.75 = 1.75, θ = 0.85 − 0.175
    np.testing.assert_allclose(to_host(p.data), [0.675])


def test_momentum_buffer_is_per_parameter(xp):
    rng = np.random.default_rng(0)
    theta = [rng.standard_normal((3, 2)), rng.standard_normal(4)]
    grads = [[rng.standard_normal(t.shape) for _ in range(3)] for t in theta]
    params = [SimpleNamespace(data=xp.array(t), grad=None) for t in theta]
    opt = SGD(params, lr=0.2, momentum=0.8, weight_decay=0.01)
    for step in range(3):
        for p, g in zip(params, grads, strict=True):
            p.grad = xp.asarray(g[step])
        opt.step()
    for p, t, g in zip(params, theta, grads, strict=True):
        expected = reference_sgd(t, g, [0.2] * 3, 0.8, 0.01, False)
        np.testing.assert_allclose(to_host(p.data), expected, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dtype_is_kept(xp, dtype):
    p = SimpleNamespace(data=xp.ones(5, dtype=dtype), grad=xp.full(5, 0.5, dtype=dtype))
    opt = SGD([p], lr=0.1, momentum=0.9, weight_decay=0.1, nesterov=True)
    opt.step()
    opt.step()
    assert p.data.dtype == dtype
    assert opt.state[0]["momentum_buffer"].dtype == dtype


@pytest.mark.parametrize(
    "kwargs",
    [dict(lr=-0.1), dict(lr=float("nan")), dict(lr=0.1, momentum=-0.5),
     dict(lr=0.1, weight_decay=-1.0), dict(lr=0.1, nesterov=True)],
)
def test_invalid_arguments(kwargs):
    with pytest.raises(ValueError):
        SGD([SimpleNamespace(data=np.zeros(2), grad=None)], **kwargs)


@pytest.mark.parametrize("config", [(0.0, 0.0, False), (0.9, 0.01, False), (0.9, 0.01, True)])
def test_matches_torch(config):
    momentum, weight_decay, nesterov = config
    kwargs = dict(lr=0.05, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov)
    assert_matches_torch(SGD, "SGD", kwargs, steps=5, skipped=(2,), seed=1)
