"""The sparse problems' models: sparse logistic regression and matrix factorization through
grad_check, their dense equivalents, ``touched()`` as the rows a gradient can reach, and ½·MSE."""

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st
from nn_helpers import SOME, check_module, perturb

from scratchpar.autograd import Tensor, grad_check
from scratchpar.autograd import functional as F
from scratchpar.nn import MatrixFactorization, SparseLogisticRegression, half_squared_error

seeds = st.integers(0, 2**32 - 1)


def sparse_rows(rng, b: int, nnz: int, n_features: int):
    """ids (b, nnz): distinct per row, ascending; values (b, nnz) float64."""
    idx = np.sort(np.stack([rng.choice(n_features, nnz, replace=False) for _ in range(b)]), 1)
    return idx.astype(np.int64), rng.random((b, nnz)) + 0.1


@SOME
@given(n_features=st.integers(2, 9), b=st.integers(1, 4), seed=seeds, data=st.data())
def test_sparse_logistic_regression_is_the_dense_model_and_passes_grad_check(n_features, b,
                                                                             seed, data):
    nnz = data.draw(st.integers(1, n_features))
    rng = np.random.default_rng(seed)
    model = perturb(SparseLogisticRegression(n_features, rng, np.float64), rng)
    idx, val = sparse_rows(rng, b, nnz, n_features)
    dense = np.zeros((b, n_features))  # (B, D) the same samples as a dense matrix
    np.put_along_axis(dense, idx, val, axis=1)
    logits = model(on_device(idx), on_device(val))
    assert logits.shape == (b,)
    np.testing.assert_allclose(host(logits.data), dense @ host(model.weight.data)
                               + host(model.bias.data), rtol=1e-12, atol=1e-14)
    y = on_device(rng.integers(0, 2, size=b))
    check_module(model, lambda: F.binary_cross_entropy_with_logits(
        model(on_device(idx), on_device(val)), y))


@SOME
@given(users=st.integers(1, 5), items=st.integers(1, 5), rank=st.integers(1, 3),
       b=st.integers(1, 6), seed=seeds)
def test_matrix_factorization_predicts_row_dot_products_and_passes_grad_check(users, items, rank,
                                                                              b, seed):
    rng = np.random.default_rng(seed)
    model = MatrixFactorization(users, items, rank, rng, np.float64)
    user, item = rng.integers(0, users, size=b), rng.integers(0, items, size=b)
    pred = model(on_device(user), on_device(item))
    full = host(model.users.data) @ host(model.items.data).T  # (U, I) every prediction
    np.testing.assert_allclose(host(pred.data), full[user, item], rtol=1e-12, atol=1e-15)
    rating = on_device(rng.standard_normal(b))
    check_module(model, lambda: half_squared_error(
        model(on_device(user), on_device(item)), rating))


@SOME
@given(kind=st.sampled_from(["logreg", "factors"]), b=st.integers(1, 6), seed=seeds)
def test_touched_rows_are_exactly_where_the_gradient_can_be_nonzero(kind, b, seed):
    rng = np.random.default_rng(seed)
    if kind == "logreg":
        model = SparseLogisticRegression(12, rng, np.float64)
        idx, val = sparse_rows(rng, b, 3, 12)
        batch = (on_device(idx), on_device(val), on_device(rng.integers(0, 2, size=b)))
        F.binary_cross_entropy_with_logits(model(*batch[:2]), batch[2]).backward()
    else:
        model = MatrixFactorization(7, 5, 2, rng, np.float64)
        batch = tuple(on_device(a) for a in (rng.integers(0, 7, size=b),
                                             rng.integers(0, 5, size=b), rng.random(b)))
        half_squared_error(model(*batch[:2]), batch[2]).backward()
    touched = model.touched(batch)
    params = dict(model.named_parameters())
    assert touched.keys() == params.keys()
    for name, rows in touched.items():
        rows = host(rows)
        assert rows.dtype == np.int64 and np.all(np.diff(rows) > 0)  # distinct, ascending
        grad = host(params[name].grad)
        untouched = np.setdiff1d(np.arange(len(grad)), rows)
        assert not np.any(grad[untouched]), name  # nothing outside the touched rows
    np.testing.assert_array_equal(host(touched["weight" if kind == "logreg" else "users"]),
                                  np.unique(host(batch[0])))


def test_initializations_are_not_degenerate():
    rng = np.random.default_rng(0)
    logreg = SparseLogisticRegression(1000, rng)
    factors = MatrixFactorization(400, 300, 4, rng)
    assert logreg.weight.dtype == np.float32 and 0.02 < float(host(logreg.weight.data).std()) < 0.1
    for table in (factors.users, factors.items):
        assert float(host(table.data).std()) == pytest.approx(0.5 * 4**-0.25, rel=0.05)


@SOME
@given(b=st.integers(0, 6), reduction=st.sampled_from(["mean", "sum"]), seed=seeds)
def test_half_squared_error_is_half_the_mean_or_sum_of_squares(b, reduction, seed):
    rng = np.random.default_rng(seed)
    pred = Tensor(on_device(rng.standard_normal(b)), requires_grad=True)
    target = rng.standard_normal(b).astype(np.float32)  # ratings arrive in float32
    loss = half_squared_error(pred, on_device(target), reduction)
    squares = 0.5 * (host(pred.data) - target.astype(np.float64)) ** 2
    want = squares.sum() / (max(b, 1) if reduction == "mean" else 1)
    assert loss.dtype == np.float64
    np.testing.assert_allclose(float(loss.item()), want, rtol=1e-12, atol=1e-300)
    if b:
        grad_check(lambda t: half_squared_error(t, on_device(target), reduction), [pred])
    with pytest.raises(ValueError, match="reduction"):
        half_squared_error(pred, on_device(target), "none")
