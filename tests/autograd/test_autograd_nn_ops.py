"""Fused ops: softmax, log-softmax, dropout, linear, layer norm and cross-entropy."""

import numpy as np
import pytest
from autograd_helpers import FEW, PROPERTY, leaf, normal, seeds, shapes
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.autograd import Tensor, grad_check
from scratchpar.autograd import functional as F
from scratchpar.device_rng import DeviceRandom


def np_log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


@st.composite
def shape_and_axis(draw):
    shape = draw(shapes(min_dims=1, max_dims=3, max_side=4))
    return shape, draw(st.integers(-len(shape), len(shape) - 1))


@PROPERTY
@given(case=shape_and_axis(), seed=seeds)
def test_softmax_and_log_softmax_grads(case, seed):
    shape, axis = case
    x = normal(np.random.default_rng(seed), shape)
    y, logy = F.softmax(x, axis=axis), F.log_softmax(x, axis=axis)
    np.testing.assert_allclose(host(logy.data), np_log_softmax(host(x.data), axis), rtol=1e-13,
                               atol=1e-15)
    np.testing.assert_allclose(host(y.data), np.exp(host(logy.data)), rtol=1e-13)
    np.testing.assert_allclose(host(y.data).sum(axis=axis), 1.0, rtol=1e-14)
    np.testing.assert_array_equal(host(x.softmax(axis=axis).data), host(y.data))
    np.testing.assert_array_equal(host(x.log_softmax(axis=axis).data), host(logy.data))
    grad_check(lambda t: F.softmax(t, axis=axis), [x])
    grad_check(lambda t: F.log_softmax(t, axis=axis), [x])


@PROPERTY
@given(case=shape_and_axis(), seed=seeds, scale=st.sampled_from([1e3, 1e4, -1e3]))
def test_softmax_stable_at_large_magnitude(case, seed, scale):
    shape, axis = case
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(shape)
    x = leaf(scale * base)
    with np.errstate(over="raise", invalid="raise"):
        y, logy = F.softmax(x, axis=axis), F.log_softmax(x, axis=axis)
        (y * Tensor(on_device(rng.standard_normal(shape)))).sum().backward()
        logy.backward(rng.standard_normal(shape))
    for arr in (y.data, logy.data, x.grad):
        assert np.isfinite(host(arr)).all()
    np.testing.assert_allclose(host(y.data).sum(axis=axis), 1.0, rtol=1e-13)
    np.testing.assert_allclose(host(logy.data), np_log_softmax(host(x.data), axis), rtol=1e-12,
                               atol=1e-9)
    shifted = F.log_softmax(leaf(x.data - 7.0 * scale), axis=axis)  # shift invariance
    np.testing.assert_allclose(host(shifted.data), host(logy.data), rtol=1e-9, atol=1e-9)


def test_softmax_of_minus_infinity_is_exactly_zero_and_grads_are_finite():
    rng = np.random.default_rng(0)
    x = normal(rng, (2, 3, 3))
    future = np.triu(np.ones((3, 3), dtype=bool), k=1)

    def causal(t):
        return F.softmax(F.masked_fill(t, on_device(future), float("-inf")), axis=-1)

    y = host(causal(x).data)
    assert (y[:, future] == 0.0).all()
    np.testing.assert_allclose(y.sum(-1), 1.0, rtol=1e-15)
    grad_check(causal, [x])
    grad = host(x.grad)
    assert (grad[:, future] == 0.0).all() and np.isfinite(grad).all()


@PROPERTY
@given(shape=shapes(min_dims=1, max_dims=3, max_side=4), seed=seeds, p=st.floats(0.05, 0.9))
def test_dropout_mask_comes_from_the_generator(shape, seed, p):
    rng = np.random.default_rng(seed)
    x = normal(rng, shape)
    a = F.dropout(x, p, DeviceRandom(seed + 1))
    b = F.dropout(x, p, DeviceRandom(seed + 1))
    np.testing.assert_array_equal(host(a.data), host(b.data))  # same stream state, same mask
    keep = DeviceRandom(seed + 1).random(shape) >= p  # drawn on the host: the same bits
    np.testing.assert_allclose(host(a.data), np.where(keep, host(x.data) / (1.0 - p), 0.0),
                               rtol=1e-15)
    a.backward(np.ones(shape))
    np.testing.assert_allclose(host(x.grad), keep / (1.0 - p), rtol=1e-15)


@PROPERTY
@given(shape=shapes(min_dims=1, max_dims=3, max_side=4), seed=seeds, p=st.floats(0.05, 0.9))
def test_dropout_grad_check_with_fixed_generator(shape, seed, p):
    x = normal(np.random.default_rng(seed), shape)
    grad_check(lambda t: F.dropout(t, p, DeviceRandom(seed)), [x])


def test_dropout_eval_and_zero_rate_are_identity():
    x = normal(np.random.default_rng(0), (4, 5))
    gen = DeviceRandom(1)
    state = gen.state
    assert F.dropout(x, 0.5, gen, training=False) is x
    assert F.dropout(x, 0.0, gen) is x
    assert gen.state == state  # no draw when nothing is dropped


def test_dropout_keeps_the_expectation():
    x = Tensor(on_device(np.ones(200_000)))
    y = host(F.dropout(x, 0.3, DeviceRandom(5)).data)
    assert set(np.unique(y)) == {0.0, 1.0 / 0.7}
    assert abs((y == 0).mean() - 0.3) < 0.005  # ≈ 5 σ of a binomial proportion
    assert abs(y.mean() - 1.0) < 0.01


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_dropout_rejects_bad_rates(p):
    with pytest.raises(ValueError, match="dropout probability"):
        F.dropout(Tensor(np.ones(3)), p, DeviceRandom(0))


@PROPERTY
@given(lead=shapes(min_dims=0, max_dims=2), d=st.integers(1, 4), f=st.integers(1, 4),
       bias=st.booleans(), seed=seeds)
def test_linear(lead, d, f, bias, seed):
    rng = np.random.default_rng(seed)
    x, w = normal(rng, lead + (d,)), normal(rng, (d, f))
    args = [x, w] + ([normal(rng, (f,))] if bias else [])
    out = F.linear(*args)
    expected = host(x.data) @ host(w.data) + (host(args[2].data) if bias else 0.0)
    np.testing.assert_allclose(host(out.data), expected, rtol=1e-13, atol=1e-15)
    grad_check(F.linear, args)


def test_linear_without_input_grad():
    rng = np.random.default_rng(3)
    x = Tensor(on_device(rng.standard_normal((2, 3))))
    w, b = normal(rng, (3, 4)), normal(rng, (4,))
    F.linear(x, w, b).backward(np.ones((2, 4)))
    assert x.grad is None
    np.testing.assert_allclose(host(w.grad), host(x.data).sum(0)[:, None].repeat(4, axis=1),
                               rtol=1e-14)
    np.testing.assert_array_equal(host(b.grad), np.full(4, 2.0))


@PROPERTY
@given(lead=shapes(min_dims=0, max_dims=2), d=st.integers(2, 5), seed=seeds)
def test_layer_norm(lead, d, seed):
    rng = np.random.default_rng(seed)
    x = normal(rng, lead + (d,))
    gamma, beta = leaf(1.0 + 0.5 * rng.standard_normal(d)), normal(rng, (d,))
    out = F.layer_norm(x, gamma, beta)
    x0 = host(x.data)
    mu = x0.mean(-1, keepdims=True)
    var = x0.var(-1, keepdims=True)
    expected = (x0 - mu) / np.sqrt(var + 1e-5) * host(gamma.data) + host(beta.data)
    np.testing.assert_allclose(host(out.data), expected, rtol=1e-12, atol=1e-14)
    plain = host(F.layer_norm(x, leaf(np.ones(d)), leaf(np.zeros(d))).data)
    np.testing.assert_allclose(plain.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(plain.var(-1), (var / (var + 1e-5))[..., 0], rtol=1e-12)
    grad_check(F.layer_norm, [x, gamma, beta])
    grad_check(lambda *t: F.layer_norm(*t, eps=0.1), [x, gamma, beta])


def np_cross_entropy(logits, targets, ignore_index, reduction):
    logp = np_log_softmax(logits, axis=1)
    valid = targets != ignore_index
    losses = -logp[np.arange(len(targets))[valid], targets[valid]]
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / valid.sum() if valid.any() else 0.0


@st.composite
def ce_case(draw):
    n, v = draw(st.integers(1, 6)), draw(st.integers(2, 5))
    ignore_index = draw(st.sampled_from([-100, 0, -1]))
    targets = draw(st.lists(st.integers(0, v - 1) | st.just(ignore_index), min_size=n,
                            max_size=n))
    return n, v, np.array(targets), ignore_index


@PROPERTY
@given(case=ce_case(), reduction=st.sampled_from(["mean", "sum"]), seed=seeds,
       scale=st.sampled_from([1.0, 3.0, 1e3]))
def test_cross_entropy_matches_numpy(case, reduction, seed, scale):
    n, v, targets, ignore_index = case
    logits = leaf(scale * np.random.default_rng(seed).standard_normal((n, v)))
    loss = F.cross_entropy(logits, on_device(targets), ignore_index=ignore_index,
                           reduction=reduction)
    assert loss.shape == ()
    expected = np_cross_entropy(host(logits.data), targets, ignore_index, reduction)
    np.testing.assert_allclose(host(loss.data), expected, rtol=1e-12, atol=1e-12)
    loss.backward()
    ignored = targets == ignore_index
    grad = host(logits.grad)
    assert (grad[ignored] == 0.0).all()  # ignored rows: no gradient at all
    assert np.isfinite(grad).all()
    np.testing.assert_allclose(grad.sum(axis=1), 0.0, atol=1e-12)  # softmax − onehot


@PROPERTY
@given(case=ce_case(), reduction=st.sampled_from(["mean", "sum"]), seed=seeds)
def test_cross_entropy_grad_check(case, reduction, seed):
    n, v, targets, ignore_index = case
    logits = normal(np.random.default_rng(seed), (n, v))
    targets = Tensor(on_device(targets))
    grad_check(lambda t: F.cross_entropy(t, targets, ignore_index, reduction), [logits])


@PROPERTY
@given(case=ce_case(), seed=seeds)
def test_cross_entropy_ignored_rows_do_not_matter(case, seed):
    n, v, targets, ignore_index = case
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, v))
    b = np.where((targets == ignore_index)[:, None], 50.0 * rng.standard_normal((n, v)), a)
    targets = on_device(targets)
    for reduction in ("mean", "sum"):
        la = F.cross_entropy(leaf(a), targets, ignore_index, reduction).data
        lb = F.cross_entropy(leaf(b), targets, ignore_index, reduction).data
        assert la == lb


@PROPERTY
@given(case=ce_case(), seed=seeds)
def test_cross_entropy_sum_is_mean_times_count(case, seed):
    n, v, targets, ignore_index = case
    count = int((targets != ignore_index).sum())
    logits = normal(np.random.default_rng(seed), (n, v))
    targets = on_device(targets)
    total = F.cross_entropy(logits, targets, ignore_index, "sum")
    mean = F.cross_entropy(logits, targets, ignore_index, "mean")
    np.testing.assert_allclose(host(total.data), host(mean.data) * count, rtol=1e-13, atol=1e-15)
    total.backward()
    g_sum, logits.grad = logits.grad, None
    mean.backward()
    np.testing.assert_allclose(host(g_sum), host(logits.grad) * count, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_all_ignored_gives_zero_loss_and_zero_grad(reduction):
    logits = normal(np.random.default_rng(0), (3, 4))
    loss = F.cross_entropy(logits, on_device(np.array([-100, -100, -100])), reduction=reduction)
    assert loss.data == 0.0
    loss.backward()
    np.testing.assert_array_equal(host(logits.grad), np.zeros((3, 4)))


def test_cross_entropy_by_hand_and_bad_reduction():
    logits = leaf([[0.0, 0.0], [np.log(3.0), 0.0]])
    targets = on_device(np.array([1, 0]))
    loss = F.cross_entropy(logits, targets)
    np.testing.assert_allclose(host(loss.data), (np.log(2.0) + np.log(4.0 / 3.0)) / 2,
                               rtol=1e-15)
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(logits, targets, reduction="none")


@FEW
@given(n=st.integers(1, 4), v=st.integers(2, 5), seed=seeds)
def test_cross_entropy_equals_composed_primitives(n, v, seed):
    """The fused op and its definition from log_softmax + getitem + mean agree, grads too."""
    rng = np.random.default_rng(seed)
    targets = on_device(rng.integers(0, v, n))
    x1 = normal(rng, (n, v))
    x2 = leaf(x1.data)
    fused = F.cross_entropy(x1, targets)
    composed = -F.mean(F.log_softmax(x2, axis=1)[on_device(np.arange(n)), targets])
    np.testing.assert_allclose(host(fused.data), host(composed.data), rtol=1e-13)
    fused.backward()
    composed.backward()
    np.testing.assert_allclose(host(x1.grad), host(x2.grad), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("d, f", [(3, 0), (0, 4)])
def test_linear_with_a_zero_wide_side_runs_both_ways(d, f):
    """A tensor-parallel rank may hold no column (or row) of a small layer: its Linear is empty
    on that side, and forward and backward still give arrays of the right shapes."""
    x = Tensor(on_device(np.ones((2, 3, d))), requires_grad=True)
    w = Tensor(on_device(np.ones((d, f))), requires_grad=True)
    b = Tensor(on_device(np.ones(f)), requires_grad=True)
    y = F.linear(x, w, b)
    assert y.shape == (2, 3, f)
    y.backward(on_device(np.ones((2, 3, f))))
    assert (x.grad.shape, w.grad.shape, b.grad.shape) == ((2, 3, d), (d, f), (f,))
    assert float(host(x.grad).sum()) == 0.0 and float(host(b.grad).sum()) == 6.0 * f
