"""Optimizer state_dict / load_state_dict: exact resume, copies, and validation errors."""

import io
from types import SimpleNamespace

import numpy as np
import pytest

from scratchpar.backend import to_host
from scratchpar.optim import SGD, Adam, AdamW

FACTORIES = {
    "sgd": lambda ps: SGD(ps, lr=0.1),
    "momentum": lambda ps: SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3),
    "nesterov": lambda ps: SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    "adam": lambda ps: Adam(ps, lr=0.01, weight_decay=1e-2),
    "adamw": lambda ps: AdamW(ps, lr=0.01),
}
SHAPES = [(3, 4), (5,), ()]
STEPS = 6


def make_run(xp, dtype, seed=0):
    """Initial parameters and per-step gradients; parameter 2 has no gradient until step 4."""
    rng = np.random.default_rng(seed)
    theta = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = [
        [None if (i == 2 and step < 4) else rng.standard_normal(s).astype(dtype)
         for i, s in enumerate(SHAPES)]
        for step in range(STEPS)
    ]
    return [xp.array(t) for t in theta], [[g if g is None else xp.asarray(g) for g in gs]
                                          for gs in grads]


def train(opt, params, grads, lrs):
    for gs, lr in zip(grads, lrs, strict=True):
        opt.lr = lr
        for p, g in zip(params, gs, strict=True):
            p.grad = g
        opt.step()


def fresh(theta):
    return [SimpleNamespace(data=t.copy(), grad=None) for t in theta]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("split", [1, 3, 5])
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_resume_is_bit_identical(xp, name, split, dtype):
    theta, grads = make_run(xp, dtype)
    lrs = [0.1 / (1 + s) for s in range(STEPS)]
    whole = fresh(theta)
    train(FACTORIES[name](whole), whole, grads, lrs)

    first = fresh(theta)
    opt = FACTORIES[name](first)
    train(opt, first, grads[:split], lrs[:split])
    sd = opt.state_dict()
    second = [SimpleNamespace(data=p.data.copy(), grad=None) for p in first]
    resumed = FACTORIES[name](second)
    resumed.load_state_dict(sd)
    assert resumed.step_count == split and resumed.lr == lrs[split - 1]
    train(resumed, second, grads[split:], lrs[split:])
    for a, b in zip(whole, second, strict=True):
        np.testing.assert_array_equal(to_host(a.data), to_host(b.data), strict=True)


@pytest.mark.parametrize("name", ["momentum", "adam"])
def test_resume_through_npz_file(xp, name):
    theta, grads = make_run(xp, "float32")
    lrs = [0.05] * STEPS
    whole = fresh(theta)
    train(FACTORIES[name](whole), whole, grads, lrs)

    first = fresh(theta)
    opt = FACTORIES[name](first)
    train(opt, first, grads[:3], lrs[:3])
    buffer = io.BytesIO()
    np.savez(buffer, **{k: to_host(v) for k, v in opt.state_dict().items()})  # 0-d scalars
    buffer.seek(0)
    with np.load(buffer) as loaded:
        sd = dict(loaded)  # host arrays, loaded into the device's buffers
    resumed = FACTORIES[name](first)
    resumed.load_state_dict(sd)
    train(resumed, first, grads[3:], lrs[3:])
    for a, b in zip(whole, first, strict=True):
        np.testing.assert_array_equal(to_host(a.data), to_host(b.data), strict=True)


def test_state_dict_keys(xp):
    theta, grads = make_run(xp, "float64")
    params = fresh(theta)
    opt = Adam(params)
    train(opt, params, grads[:2], [1e-3] * 2)
    sd = opt.state_dict()
    assert set(sd) == {"step_count", "lr", "step.0", "step.1", "exp_avg.0", "exp_avg.1",
                       "exp_avg_sq.0", "exp_avg_sq.1"}  # parameter 2 has had no gradient yet
    assert sd["step_count"] == 2 and sd["step.0"] == 2 and sd["exp_avg.1"].shape == (5,)
    assert set(SGD(params, lr=0.1).state_dict()) == {"step_count", "lr"}


@pytest.mark.parametrize("name", ["momentum", "adam"])
def test_state_dict_is_a_copy_both_ways(name):
    theta, grads = make_run(np, "float64")
    params = fresh(theta)
    opt = FACTORIES[name](params)
    train(opt, params, grads[:2], [0.1] * 2)
    before = opt.state_dict()
    sd = opt.state_dict()
    for value in sd.values():
        if isinstance(value, np.ndarray):
            value += 1.0
    assert all(np.array_equal(before[k], v) for k, v in opt.state_dict().items())
    opt.load_state_dict(before)
    for value in before.values():
        if isinstance(value, np.ndarray):
            value += 1.0
    arrays = {k: v for k, v in opt.state_dict().items() if isinstance(v, np.ndarray)}
    assert arrays and not any(np.array_equal(before[k], v) for k, v in arrays.items())


def test_load_copies_into_existing_buffers(xp):
    params = fresh([xp.ones(3)])
    params[0].grad = xp.ones(3)
    opt = Adam(params)
    opt.step()
    buffer = opt.state[0]["exp_avg"]
    sd = opt.state_dict()
    sd["exp_avg.0"] = np.full(3, 7.0)  # a host array, as from a checkpoint file
    opt.load_state_dict(sd)
    assert opt.state[0]["exp_avg"] is buffer
    np.testing.assert_array_equal(to_host(buffer), [7.0, 7.0, 7.0])


def test_load_drops_state_absent_from_the_dict(xp):
    params = fresh([xp.ones(3)])
    params[0].grad = xp.ones(3)
    opt = SGD(params, lr=0.1, momentum=0.9)
    empty = opt.state_dict()
    opt.step()
    opt.load_state_dict(empty)
    assert opt.state == [{}] and opt.step_count == 0
    opt.step()  # the momentum buffer starts again from b = g
    np.testing.assert_array_equal(to_host(opt.state[0]["momentum_buffer"]), np.ones(3))


def _trained_adam(xp):
    theta, grads = make_run(xp, "float64")
    params = fresh(theta)
    opt = Adam(params)
    train(opt, params, grads[:5], [1e-3] * 5)
    return opt


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda sd: sd.pop("step_count"), "missing 'step_count'"),
        (lambda sd: sd.pop("lr"), "missing 'lr'"),
        (lambda sd: sd.pop("exp_avg_sq.1"), "missing 'exp_avg_sq.1'"),
        (lambda sd: sd.pop("step.2"), "missing 'step.2'"),
        (lambda sd: sd.update({"exp_avg.0": np.zeros((4, 3))}), r"'exp_avg.0'.*\(4, 3\)"),
        (lambda sd: sd.update({"exp_avg.2": np.zeros(1)}), r"'exp_avg.2'.*shape"),
        (lambda sd: sd.update({"exp_avg.3": np.zeros(2)}), "'exp_avg.3'.*only 3"),
        (lambda sd: sd.update({"momentum_buffer.0": np.zeros((3, 4))}), "'momentum_buffer.0'"),
        (lambda sd: sd.update({"exp_avg": np.zeros((3, 4))}), "unexpected key 'exp_avg'"),
        (lambda sd: sd.update({"step_count": 2.5}), "'step_count'"),
        (lambda sd: sd.update({"step.0": -1}), "'step.0'"),
        (lambda sd: sd.update({"lr": np.ones(2)}), "'lr'"),
    ],
)
def test_load_errors_name_the_key_and_change_nothing(xp, edit, match):
    opt = _trained_adam(xp)
    before = opt.state_dict()
    sd = opt.state_dict()
    sd["exp_avg.1"] = sd["exp_avg.1"] + 1.0  # a change that a partial load would let through
    sd["step_count"] = 99
    edit(sd)
    with pytest.raises(ValueError, match=match):
        opt.load_state_dict(sd)
    after = opt.state_dict()
    assert set(after) == set(before)
    assert all(np.array_equal(after[k], before[k]) for k in before)


def test_adam_state_does_not_load_into_sgd():
    params = fresh([np.ones(3)])
    params[0].grad = np.ones(3)
    adam = Adam(params)
    adam.step()
    with pytest.raises(ValueError, match="unexpected key"):
        SGD(params, lr=0.1, momentum=0.9).load_state_dict(adam.state_dict())
