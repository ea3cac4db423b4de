"""What every optimizer promises: in-place updates, untouched gradients, skipped None gradients."""

from types import SimpleNamespace

import numpy as np
import pytest

from scratchpar.backend import to_host
from scratchpar.optim import SGD, Adam, AdamW, Optimizer

FACTORIES = [
    lambda ps: SGD(ps, lr=0.1),
    lambda ps: SGD(ps, lr=0.1, weight_decay=0.1),
    lambda ps: SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.1, nesterov=True),
    lambda ps: Adam(ps, lr=0.1, weight_decay=0.1),
    lambda ps: AdamW(ps, lr=0.1, weight_decay=0.1),
]
IDS = ["sgd", "sgd-wd", "nesterov-wd", "adam-wd", "adamw"]


def make_params(xp, dtype="float64"):
    rng = np.random.default_rng(0)
    return [
        SimpleNamespace(data=xp.asarray(rng.standard_normal(s).astype(dtype)),
                        grad=xp.asarray(rng.standard_normal(s).astype(dtype)))
        for s in [(4, 3), (6,), (2, 1, 2)]
    ]


@pytest.mark.parametrize("factory", FACTORIES, ids=IDS)
def test_updates_in_place_and_leaves_grads_alone(xp, factory):
    params = make_params(xp)
    datas = [p.data for p in params]
    grads = [p.grad for p in params]
    before = [to_host(p.data).copy() for p in params]
    grads_before = [to_host(p.grad).copy() for p in params]
    opt = factory(params)
    for _ in range(3):
        opt.step()
    for p, data, grad, b, gb in zip(params, datas, grads, before, grads_before, strict=True):
        assert p.data is data and p.grad is grad
        assert not np.array_equal(to_host(data), b)  # the update reached the shared array
        np.testing.assert_array_equal(to_host(p.grad), gb)


@pytest.mark.parametrize("factory", FACTORIES, ids=IDS)
def test_parameters_without_gradient_are_untouched(xp, factory):
    params = make_params(xp)
    params[1].grad = None
    before = to_host(params[1].data).copy()
    opt = factory(params)
    for _ in range(3):
        opt.step()
    np.testing.assert_array_equal(to_host(params[1].data), before)
    assert opt.state[1] == {}


@pytest.mark.parametrize("factory", FACTORIES, ids=IDS)
def test_zero_grad_and_step_count(xp, factory):
    params = make_params(xp)
    opt = factory(params)
    opt.step()
    opt.zero_grad()
    assert all(p.grad is None for p in params)
    before = [to_host(p.data).copy() for p in params]
    opt.step()  # nothing has a gradient: nothing moves, but the step is counted
    assert opt.step_count == 2
    for p, b in zip(params, before, strict=True):
        np.testing.assert_array_equal(to_host(p.data), b)


@pytest.mark.parametrize("factory", FACTORIES, ids=IDS)
def test_float32_parameters_stay_float32(xp, factory):
    params = make_params(xp, "float32")
    opt = factory(params)
    opt.step()
    assert all(p.data.dtype == np.float32 for p in params)
    assert all(v.dtype == np.float32 for s in opt.state for v in s.values() if hasattr(v, "dtype"))


def test_params_are_kept_in_order_and_generators_work():
    params = make_params(np)
    opt = SGD(iter(params), lr=0.1)
    assert opt.params == params and opt.step_count == 0
    assert SGD([], lr=0.1).state_dict() == {"step_count": 0, "lr": 0.1}


def test_lr_is_settable_and_used(xp):
    p = SimpleNamespace(data=xp.zeros(2), grad=xp.ones(2))
    opt = SGD([p], lr=1.0)
    opt.lr = 0.25
    opt.step()
    np.testing.assert_array_equal(to_host(p.data), [-0.25, -0.25])


def test_duplicate_parameters_are_rejected():
    p = SimpleNamespace(data=np.zeros(2), grad=None)
    with pytest.raises(ValueError, match="more than once"):
        Adam([p, p])


def test_base_class_needs_an_update_rule():
    with pytest.raises(TypeError, match="abstract"):
        Optimizer([SimpleNamespace(data=np.zeros(2), grad=np.ones(2))], lr=0.1)
