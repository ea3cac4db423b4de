"""Global gradient norm and clipping, against a hand-computed norm and torch where installed."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from optim_helpers import ON_XP

from scratchpar.backend import to_host
from scratchpar.optim import clip_grad_norm, global_grad_norm

shapes = st.lists(st.lists(st.integers(1, 4), max_size=3).map(tuple), min_size=1, max_size=4)


def make_params(xp, shapes, seed, dtype="float64"):
    rng = np.random.default_rng(seed)
    return [
        SimpleNamespace(data=xp.zeros(s, dtype=dtype),
                        grad=xp.asarray((rng.standard_normal(s) * 3).astype(dtype)))
        for s in shapes
    ]


def manual_norm(grads):
    return float(np.sqrt(sum(float(np.sum(np.square(g))) for g in grads)))


@ON_XP
@given(shapes=shapes, seed=st.integers(0, 2**16))
def test_global_norm_matches_manual(xp, shapes, seed):
    params = make_params(xp, shapes, seed)
    params.append(SimpleNamespace(data=xp.ones(3), grad=None))
    norm = global_grad_norm(params)
    assert isinstance(norm, float)
    assert norm == pytest.approx(manual_norm([to_host(p.grad) for p in params[:-1]]), rel=1e-12)


@ON_XP
@given(shapes=shapes, seed=st.integers(0, 2**16), fraction=st.floats(0.01, 0.9))
def test_clipping_branch(xp, shapes, seed, fraction):
    params = make_params(xp, shapes, seed)
    grads = [p.grad for p in params]
    before = [to_host(g).copy() for g in grads]
    norm = manual_norm(before)
    max_norm = fraction * norm
    returned = clip_grad_norm(params, max_norm)
    assert isinstance(returned, float)
    assert returned == pytest.approx(norm, rel=1e-12)  # the norm before clipping
    scale = max_norm / (norm + 1e-6)
    for p, g, b in zip(params, grads, before, strict=True):
        assert p.grad is g  # scaled in place
        np.testing.assert_allclose(to_host(g), b * scale, rtol=1e-12, atol=1e-300)
    after = manual_norm([to_host(g) for g in grads])
    assert after == pytest.approx(max_norm * norm / (norm + 1e-6), rel=1e-12)
    assert after < max_norm


@ON_XP
@given(shapes=shapes, seed=st.integers(0, 2**16), factor=st.floats(1.01, 100.0))
def test_non_clipping_branch(xp, shapes, seed, factor):
    params = make_params(xp, shapes, seed)
    before = [to_host(p.grad).copy() for p in params]
    norm = manual_norm(before)
    assert clip_grad_norm(params, factor * norm) == pytest.approx(norm, rel=1e-12)
    for p, b in zip(params, before, strict=True):
        np.testing.assert_array_equal(to_host(p.grad), b)


def test_by_hand_and_none_gradients_skipped(xp):
    params = [
        SimpleNamespace(data=xp.zeros(2), grad=xp.asarray([3.0, 0.0])),
        SimpleNamespace(data=xp.zeros(1), grad=None),
        SimpleNamespace(data=xp.zeros((1, 1)), grad=xp.asarray([[4.0]])),
    ]
    assert global_grad_norm(params) == 5.0
    assert clip_grad_norm(params, 1.0) == 5.0
    np.testing.assert_allclose(to_host(params[0].grad), [3.0 / (5.0 + 1e-6), 0.0], rtol=1e-15)
    np.testing.assert_allclose(to_host(params[2].grad), [[4.0 / (5.0 + 1e-6)]], rtol=1e-15)
    assert params[1].grad is None


def test_no_gradients(xp):
    params = [SimpleNamespace(data=xp.zeros(2), grad=None)]
    assert global_grad_norm(params) == 0.0
    assert clip_grad_norm(params, 1.0) == 0.0
    assert global_grad_norm([]) == 0.0


def test_float32_gradients_stay_float32(xp):
    params = make_params(xp, [(5,), (2, 3)], 0, "float32")
    clip_grad_norm(params, 0.1)
    assert all(p.grad.dtype == np.float32 for p in params)
    assert global_grad_norm(params) == pytest.approx(0.1, rel=1e-5)


@pytest.mark.parametrize("max_norm", [0.0, -1.0, float("nan")])
def test_invalid_max_norm(max_norm):
    with pytest.raises(ValueError, match="max_norm"):
        clip_grad_norm(make_params(np, [(2,)], 0), max_norm)


@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_matches_torch(max_norm):
    torch = pytest.importorskip("torch")
    params = make_params(np, [(4, 3), (7,), ()], 5)
    theirs = [torch.zeros(p.grad.shape, dtype=torch.float64, requires_grad=True) for p in params]
    for p, t in zip(params, theirs, strict=True):
        t.grad = torch.tensor(p.grad)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    assert clip_grad_norm(params, max_norm) == pytest.approx(float(expected), rel=1e-12)
    for p, t in zip(params, theirs, strict=True):
        np.testing.assert_allclose(p.grad, t.grad.numpy(), rtol=1e-12)
