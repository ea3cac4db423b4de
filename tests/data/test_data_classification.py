"""SyntheticClassification: shapes, determinism, a learnable teacher, label noise, exact floor."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.data import SyntheticClassification


@settings(max_examples=20, deadline=None)
@given(
    n_features=st.integers(1, 50),
    n_classes=st.integers(2, 12),
    seed=st.integers(0, 2**32),
    step=st.integers(0, 2**40),
    batch_size=st.integers(1, 33),
)
def test_batches_are_deterministic_and_well_typed(n_features, n_classes, seed, step, batch_size):
    data = SyntheticClassification(n_features, n_classes, seed=seed)
    x, y = data.batch(step, batch_size)
    assert x.dtype == np.float32
    assert x.shape == (batch_size, n_features)
    assert y.dtype == np.int64
    assert y.shape == (batch_size,)
    assert np.all((y >= 0) & (y < n_classes))
    np.testing.assert_array_equal(y, data.label(x))
    x2, y2 = SyntheticClassification(n_features, n_classes, seed=seed).batch(step, batch_size)
    np.testing.assert_array_equal(x2, x)
    np.testing.assert_array_equal(y2, y)


def test_steps_and_seeds_differ():
    data = SyntheticClassification(seed=0)
    assert not np.array_equal(data.batch(0, 4)[0], data.batch(1, 4)[0])
    assert not np.array_equal(SyntheticClassification(seed=1).w1, data.w1)
    assert data.n_features == 784
    assert data.n_classes == 10


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_classes_are_all_used_and_roughly_balanced(seed):
    _, y = SyntheticClassification(seed=seed).batch(0, 4000)
    counts = np.bincount(y, minlength=10)
    assert counts.min() > 100
    assert counts.max() < 1000


def test_labels_are_learnable_by_a_small_mlp():
    """A 2-layer net trained by full-batch gradient descent beats chance and the majority class."""
    data = SyntheticClassification(n_features=8, n_classes=3, seed=0)
    x, y = data.batch(0, 1000)
    x_test, y_test = data.batch(1, 2000)
    x = x.astype(np.float64)  # (N, D)
    g = np.random.default_rng(0)
    w1, w2 = g.normal(0, 0.5, (8, 32)), g.normal(0, 0.1, (32, 3))
    b1, b2 = np.zeros(32), np.zeros(3)
    onehot = np.eye(3)[y]  # (N, K)
    for _ in range(150):
        h = np.tanh(x @ w1 + b1)  # (N, H)
        logits = h @ w2 + b2  # (N, K)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        d_logits = (p - onehot) / len(x)  # (N, K)
        d_h = (d_logits @ w2.T) * (1 - h**2)  # (N, H)
        w2 -= 2.0 * h.T @ d_logits
        b2 -= 2.0 * d_logits.sum(axis=0)
        w1 -= 2.0 * x.T @ d_h
        b1 -= 2.0 * d_h.sum(axis=0)
    accuracy = np.mean(np.argmax(np.tanh(x_test @ w1 + b1) @ w2 + b2, axis=1) == y_test)
    majority = np.bincount(y_test).max() / len(y_test)
    assert accuracy > 0.8
    assert accuracy > majority + 0.3


@pytest.mark.parametrize("noise", [0.1, 0.5])
def test_label_noise_rate(noise):
    data = SyntheticClassification(n_features=5, n_classes=4, seed=3, noise=noise)
    batches = [data.batch(step, 1000) for step in range(5)]
    flips = np.concatenate([data.label(x) != y for x, y in batches])  # (N,)
    rate = noise * 3 / 4  # a random class equals the teacher's one time in four
    assert abs(flips.mean() - rate) < 5 * math.sqrt(rate * (1 - rate) / len(flips))


@pytest.mark.parametrize(("noise", "n_classes"), [(0.0, 10), (0.2, 5), (1.0, 7)])
def test_bayes_risk_is_the_bayes_cross_entropy(noise, n_classes):
    data = SyntheticClassification(n_features=6, n_classes=n_classes, seed=0, noise=noise)
    floor = data.bayes_risk()
    if noise == 0.0:
        assert floor == 0.0
    if noise == 1.0:
        assert floor == pytest.approx(math.log(n_classes), rel=1e-12)
    x, y = data.batch(0, 20000)
    hit = y == data.label(x)
    posterior = np.where(hit, 1 - noise + noise / n_classes, noise / n_classes)  # (N,)
    nll = -np.log(posterior)
    assert abs(nll.mean() - floor) < 5 * nll.std() / math.sqrt(len(nll)) + 1e-12


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_features": 0}, "n_features"),
        ({"n_classes": 1}, "n_classes"),
        ({"seed": -2}, "seed"),
        ({"noise": -0.1}, "noise"),
        ({"noise": 1.5}, "noise"),
        ({"noise": float("nan")}, "noise"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SyntheticClassification(**kwargs)
