"""Adam and AdamW against a hand-written NumPy reference, and against torch where installed."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from optim_helpers import ON_XP, assert_matches_torch

from scratchpar.backend import to_host
from scratchpar.optim import Adam, AdamW


def reference_adam(theta, grads, lrs, betas, eps, weight_decay, decoupled):
    """Kingma & Ba 2015, Algorithm 1, with L2 (Adam) or decoupled (AdamW) weight decay."""
    beta1, beta2 = betas
    theta = theta.copy()
    m = np.zeros_like(theta)
    v = np.zeros_like(theta)
    for t, (g, lr) in enumerate(zip(grads, lrs, strict=True), start=1):
        if decoupled:
            theta = theta - lr * weight_decay * theta
        else:
            g = g + weight_decay * theta
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        m_hat = m / (1 - beta1**t)
        v_hat = v / (1 - beta2**t)
        theta = theta - lr * m_hat / (np.sqrt(v_hat) + eps)
    return theta


@ON_XP
@given(
    decoupled=st.booleans(),
    weight_decay=st.sampled_from([0.0, 0.01, 0.3]),
    betas=st.sampled_from([(0.9, 0.999), (0.5, 0.9), (0.0, 0.99)]),
    eps=st.sampled_from([1e-8, 1e-3]),
    shape=st.lists(st.integers(1, 5), min_size=0, max_size=3).map(tuple),
    steps=st.integers(1, 6),
    seed=st.integers(0, 2**16),
)
def test_adam_matches_reference(xp, decoupled, weight_decay, betas, eps, shape, steps, seed):
    rng = np.random.default_rng(seed)
    theta0 = rng.standard_normal(shape)
    grads = [rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 3) for _ in range(steps)]
    lrs = rng.uniform(1e-3, 0.1, steps)
    p = SimpleNamespace(data=xp.array(theta0), grad=None)
    cls = AdamW if decoupled else Adam
    opt = cls([p], lr=lrs[0], betas=betas, eps=eps, weight_decay=weight_decay)
    for g, lr in zip(grads, lrs, strict=True):
        opt.lr = lr
        p.grad = xp.asarray(g)
        opt.step()
    expected = reference_adam(theta0, grads, lrs, betas, eps, weight_decay, decoupled)
    np.testing.assert_allclose(to_host(p.data), expected, rtol=1e-10, atol=1e-12)


def test_first_adam_step_moves_by_lr(xp):
    # t = 1: m̂ = g and v̂ = g², so with ε = 0 every coordinate moves by exactly lr·sign(g).
    p = SimpleNamespace(data=xp.asarray([1.0, 1.0, 1.0]), grad=xp.asarray([3.0, -1e-4, 250.0]))
    Adam([p], lr=0.01, eps=0.0).step()
    np.testing.assert_allclose(to_host(p.data), [0.99, 1.01, 0.99], rtol=1e-14)


def test_adamw_decays_without_gradient_signal(xp):
    # A zero gradient leaves only the decoupled decay: θ ← (1 − lr·λ)θ, step after step.
    p = SimpleNamespace(data=xp.asarray([2.0, -4.0]), grad=xp.zeros(2))
    opt = AdamW([p], lr=0.1, weight_decay=0.5)
    for _ in range(3):
        opt.step()
    np.testing.assert_allclose(to_host(p.data), np.array([2.0, -4.0]) * 0.95**3, rtol=1e-14)


def test_adam_l2_decay_goes_through_the_moments(xp):
    # With L2 decay and zero gradient, g = λθ; the first step moves by lr·sign(θ), unlike AdamW.
    p = SimpleNamespace(data=xp.asarray([2.0, -4.0]), grad=xp.zeros(2))
    Adam([p], lr=0.1, eps=0.0, weight_decay=0.5).step()
    np.testing.assert_allclose(to_host(p.data), [1.9, -3.9], rtol=1e-14)


def test_step_count_is_per_parameter(xp):
    # A parameter without a gradient on a step keeps its t, so its bias correction lags behind.
    rng = np.random.default_rng(3)
    theta = [rng.standard_normal(3), rng.standard_normal((2, 2))]
    grads = [[rng.standard_normal(t.shape) for _ in range(4)] for t in theta]
    params = [SimpleNamespace(data=xp.array(t), grad=None) for t in theta]
    opt = Adam(params, lr=0.05)
    for step in range(4):
        params[0].grad = xp.asarray(grads[0][step])
        params[1].grad = None if step in (0, 2) else xp.asarray(grads[1][step])
        opt.step()
    assert (opt.step_count, opt.state[0]["step"], opt.state[1]["step"]) == (4, 4, 2)
    expected0 = reference_adam(theta[0], grads[0], [0.05] * 4, (0.9, 0.999), 1e-8, 0.0, False)
    expected1 = reference_adam(
        theta[1], [grads[1][1], grads[1][3]], [0.05] * 2, (0.9, 0.999), 1e-8, 0.0, False
    )
    np.testing.assert_allclose(to_host(params[0].data), expected0, rtol=1e-12)
    np.testing.assert_allclose(to_host(params[1].data), expected1, rtol=1e-12)


@pytest.mark.parametrize("cls", [Adam, AdamW])
def test_float32_state_stays_float32(xp, cls):
    p = SimpleNamespace(data=xp.ones(4, dtype="float32"), grad=xp.full(4, 0.25, dtype="float32"))
    opt = cls([p], lr=0.1, weight_decay=0.1)
    opt.step()
    opt.step()
    assert p.data.dtype == "float32"
    assert opt.state[0]["exp_avg"].dtype == "float32"
    assert opt.state[0]["exp_avg_sq"].dtype == "float32"
    expected = reference_adam(
        np.ones(4), [np.full(4, 0.25)] * 2, [0.1] * 2, (0.9, 0.999), 1e-8, 0.1, cls is AdamW
    )
    np.testing.assert_allclose(to_host(p.data), expected, rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs",
    [dict(lr=-1.0), dict(betas=(1.0, 0.999)), dict(betas=(0.9, -0.1)), dict(eps=-1e-8),
     dict(weight_decay=-0.01)],
)
@pytest.mark.parametrize("cls", [Adam, AdamW])
def test_invalid_arguments(cls, kwargs):
    with pytest.raises(ValueError):
        cls([SimpleNamespace(data=np.zeros(2), grad=None)], **kwargs)


def test_defaults():
    params = [SimpleNamespace(data=np.zeros(2), grad=None)]
    adam, adamw = Adam(params), AdamW(params)
    assert (adam.lr, adam.betas, adam.eps, adam.weight_decay) == (1e-3, (0.9, 0.999), 1e-8, 0.0)
    assert adamw.lr == 1e-3
    assert (adamw.betas, adamw.eps, adamw.weight_decay) == ((0.9, 0.999), 1e-8, 0.01)


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_matches_torch(name, weight_decay):
    kwargs = dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=weight_decay)
    make = {"Adam": Adam, "AdamW": AdamW}[name]
    assert_matches_torch(make, name, kwargs, steps=6, skipped=(1, 4), seed=2)
