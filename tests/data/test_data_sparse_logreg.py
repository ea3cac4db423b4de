"""SparseLogistic: batches pure in (seed, step), distinct skewed features of unit norm, the exact
law of successive sampling, labels from the true model, and the estimated Bayes floor."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.data import SparseLogistic
from scratchpar.data.sparse_logreg import bernoulli_entropy


@st.composite
def datasets(draw):
    n_features = draw(st.integers(2, 300))
    return SparseLogistic(n_features, draw(st.integers(1, n_features // 2)),
                          seed=draw(st.integers(0, 2**32)))


@settings(max_examples=30, deadline=None)
@given(data=datasets(), step=st.integers(0, 2**40), batch_size=st.integers(1, 40))
def test_batches_are_pure_and_well_formed(data, step, batch_size):
    idx, val, y = data.batch(step, batch_size)
    b, k = batch_size, data.nnz
    assert (idx.shape, val.shape, y.shape) == ((b, k), (b, k), (b,))
    assert (idx.dtype, val.dtype, y.dtype) == (np.int64, np.float32, np.int64)
    assert np.all(np.diff(idx, axis=1) > 0)  # distinct, ascending in each row
    assert idx.min() >= 0 and idx.max() < data.n_features
    assert np.all(val > 0)
    np.testing.assert_allclose(np.linalg.norm(val, axis=1), 1.0, rtol=1e-6)
    assert set(np.unique(y)) <= {0, 1}
    again = SparseLogistic(data.n_features, data.nnz, seed=data.seed).batch(step, batch_size)
    for a, b in zip(again, (idx, val, y)):
        np.testing.assert_array_equal(a, b)


def test_steps_and_seeds_differ():
    data = SparseLogistic(seed=0)
    assert not np.array_equal(data.batch(0, 8)[0], data.batch(1, 8)[0])
    assert not np.array_equal(SparseLogistic(seed=1).weight, data.weight)
    assert (data.n_features, data.nnz) == (784, 8)


def test_features_are_drawn_by_successive_sampling_exactly():
    """2 of 4 features: P({i, j}) = p_i·p_j/(1 − p_i) + p_j·p_i/(1 − p_j) (i first, or j)."""
    data = SparseLogistic(4, 2, seed=5)
    p = data.popularity
    pairs = np.concatenate([data.batch(s, 5000)[0] for s in range(8)])  # (N, 2)
    n = len(pairs)
    for i in range(4):
        for j in range(i + 1, 4):
            want = p[i] * p[j] * (1 / (1 - p[i]) + 1 / (1 - p[j]))
            seen = np.mean((pairs[:, 0] == i) & (pairs[:, 1] == j))
            assert abs(seen - want) < 5 * math.sqrt(want * (1 - want) / n), (i, j, seen, want)


def test_feature_popularity_is_skewed_toward_low_ids():
    data = SparseLogistic(784, 8, seed=0)
    idx = np.concatenate([data.batch(s, 1000)[0] for s in range(5)])  # (5000, 8)
    share = np.bincount(idx.ravel(), minlength=784) / len(idx)  # samples holding each feature
    assert share[0] > 0.6  # the hottest feature is in most samples
    assert share[:78].sum() / share.sum() > 0.6  # a tenth of the features, most non-zeros
    assert share[392:].mean() < share[0] / 100  # the rare half, each in under 1% of them
    decile = share.reshape(8, 98).sum(axis=1)  # (8,) by popularity rank: never rising
    assert np.all(np.diff(decile) < 0)


def test_labels_follow_the_true_logistic_model():
    data = SparseLogistic(64, 4, seed=2)
    batches = [data.batch(s, 4000) for s in range(3)]
    p = np.concatenate([data.probability(i, v) for i, v, _ in batches])  # (N,)
    y = np.concatenate([b[2] for b in batches])
    assert abs((y - p).mean()) < 5 * math.sqrt((p * (1 - p)).mean() / len(p))
    for lo, hi in ((0.0, 0.2), (0.8, 1.0)):  # calibrated where the model is confident
        sel = (p >= lo) & (p < hi)
        assert abs((y[sel] - p[sel]).mean()) < 5 * math.sqrt(0.25 / sel.sum())


@pytest.mark.parametrize("n_features, nnz, seed", [(784, 8, 0), (64, 4, 3), (40, 20, 1)])
def test_the_true_models_log_loss_meets_the_floor(n_features, nnz, seed):
    data = SparseLogistic(n_features, nnz, seed=seed)
    floor = data.bayes_risk()
    assert 0.0 < floor < math.log(2)
    assert 0 < data.floor_stderr < 2e-3  # a tight estimate
    losses = []
    for s in range(10):
        idx, val, y = data.batch(s, 2000)
        z = data.logit(idx, val)  # (B,)
        losses.append(np.logaddexp(0.0, z) - y * z)  # −log p(y | x) of the true model
    losses = np.concatenate(losses)
    se = math.hypot(losses.std() / math.sqrt(len(losses)), data.floor_stderr)
    assert abs(losses.mean() - floor) < 4 * se, (losses.mean(), floor, se)


def test_the_floor_is_fixed_by_the_seed():
    a, b = SparseLogistic(100, 5, seed=4), SparseLogistic(100, 5, seed=4)
    assert a.bayes_risk() == b.bayes_risk() and a.floor_stderr == b.floor_stderr
    assert SparseLogistic(100, 5, seed=5).bayes_risk() != a.bayes_risk()


def test_bernoulli_entropy_is_stable_and_exact():
    z = np.array([0.0, 2.0, -2.0, 800.0, -800.0])
    p = 1 / (1 + np.exp(-z[:3]))
    naive = -(p * np.log(p) + (1 - p) * np.log(1 - p))
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        h = bernoulli_entropy(z)
    np.testing.assert_allclose(h[:3], naive, rtol=1e-14)
    assert h[0] == pytest.approx(math.log(2), rel=1e-15) and h[3] == h[4] == 0.0


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"n_features": 1}, "n_features"),
    ({"nnz": 0}, "nnz"),
    ({"n_features": 10, "nnz": 6}, "at most n_features / 2"),
    ({"seed": -1}, "seed"),
    ({"nnz": 2.0}, "nnz"),
])
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SparseLogistic(**kwargs)
