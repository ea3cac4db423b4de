"""The guarded step: a finite step is clip-then-step exactly; a step whose loss or gradient is not
finite leaves the parameters and the optimizer state untouched, bit for bit."""

import math

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.nn.module import Parameter
from scratchpar.optim import SGD, AdamW, clip_grad_norm, guarded_step

optimizers = st.sampled_from((lambda ps: AdamW(ps, 0.1, weight_decay=0.01),
                              lambda ps: SGD(ps, 0.1, momentum=0.9)))


def params_with_grads(seed: int, scale: float = 3.0) -> list[Parameter]:
    g = np.random.default_rng(seed)
    params = [Parameter(on_device(g.standard_normal(s))) for s in [(3, 4), (4,), (2, 2)]]
    for p in params:
        p.grad = on_device(g.standard_normal(p.data.shape) * scale)
    return params


def snapshot(params, optimizer) -> list[bytes]:
    state = optimizer.state_dict()
    return [host(p.data).tobytes() for p in params] + [
        host(v).tobytes() for _, v in sorted(state.items())]


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), make=optimizers, clip=st.sampled_from((0.0, 0.5, 100.0)))
def test_a_finite_step_is_clip_then_step(seed, make, clip):
    mine, theirs = params_with_grads(seed), params_with_grads(seed)
    opt_mine, opt_theirs = make(mine), make(theirs)
    for _ in range(2):  # a second step: the optimizer state carries over
        metrics = guarded_step(opt_mine, mine, 1.25, clip)
        norm = clip_grad_norm(theirs, clip) if clip else math.sqrt(
            sum(float((p.grad**2).sum()) for p in theirs))
        opt_theirs.step()
        assert metrics == {"loss": 1.25, "grad_norm": pytest.approx(norm, rel=1e-12),
                           "skipped": False}
    assert snapshot(mine, opt_mine) == snapshot(theirs, opt_theirs)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), make=optimizers,
       bad=st.sampled_from(("loss nan", "loss inf", "grad nan", "grad -inf")))
def test_a_non_finite_loss_or_gradient_leaves_everything_as_it_was(seed, make, bad):
    params = params_with_grads(seed)
    optimizer = make(params)
    guarded_step(optimizer, params, 1.0, 1.0)  # some optimizer state to keep
    for p in params:
        p.grad = on_device(np.random.default_rng(seed + 1).standard_normal(p.data.shape))
    loss = float(bad.split()[1]) if bad.startswith("loss") else 2.0
    if bad.startswith("grad"):
        params[1].grad[2] = float(bad.split()[1])
    before = snapshot(params, optimizer)
    metrics = guarded_step(optimizer, params, loss, 1.0)
    assert metrics["skipped"] is True and optimizer.step_count == 1
    assert not (math.isfinite(metrics["loss"]) and math.isfinite(metrics["grad_norm"]))
    assert snapshot(params, optimizer) == before


def test_a_given_norm_is_used_for_clipping_and_the_verdict():
    params = params_with_grads(0, scale=1.0)
    guarded_step(SGD(params, 0.0), params, 1.0, grad_clip=1.0, norm=4.0)  # lr 0: grads only
    np.testing.assert_allclose(host(params[0].grad),
                               host(params_with_grads(0, scale=1.0)[0].grad) / 4.0, rtol=1e-6)
    assert guarded_step(SGD(params, 0.1), params, 1.0, norm=math.inf)["skipped"]
