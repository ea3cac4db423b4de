"""Mixed-precision updates: the inner rule applied to fp32 masters, bit for bit as that rule on
fp32 parameters with the unscaled gradient; the 16-bit parameters are the masters rounded; an
update too small for 16 bits is kept; an overflow skips the step and halves the scale."""

import numpy as np
import pytest
from device_helpers import host, on_device

from scratchpar.autograd.precision import bfloat16
from scratchpar.nn.module import Parameter
from scratchpar.optim import SGD, AdamW, guarded_step
from scratchpar.optim.mixed import MixedPrecision
from scratchpar.optim.scaler import LossScaler

RULES = {"adamw": lambda ps: AdamW(ps, 1e-2, weight_decay=0.1),
         "sgd": lambda ps: SGD(ps, 1e-2, momentum=0.9, nesterov=True)}


def low_dtypes(xp):
    return [np.float16] + ([bfloat16()] if xp is np else [])  # CuPy has no bfloat16


def grads(step: int):
    g = np.random.default_rng(step)
    return [g.standard_normal((3, 4)), g.standard_normal(5)]


@pytest.mark.parametrize("rule", RULES)
def test_the_masters_step_as_the_rule_on_fp32_with_the_unscaled_gradient(xp, rule):
    start = np.random.default_rng(1)
    init = [start.standard_normal((3, 4)), start.standard_normal(5)]
    for dtype in low_dtypes(xp):
        low = [Parameter(on_device(w, dtype)) for w in init]
        ref = [Parameter(on_device(host(p.data).astype(np.float32))) for p in low]
        mixed, plain = MixedPrecision(RULES[rule](low), LossScaler(scale=256.0)), RULES[rule](ref)
        for step in range(3):
            for p, r, g in zip(low, ref, grads(step)):
                p.grad = on_device(g * 256.0, dtype)  # S·∇ in 16 bits
                r.grad = on_device(host(p.grad).astype(np.float32) / np.float32(256.0))
            mixed.step()
            plain.step()
        for i, (p, r) in enumerate(zip(low, ref)):
            master = mixed.state[i]["master"]
            assert master.dtype == np.float32 and p.data.dtype == dtype
            np.testing.assert_array_equal(host(master), host(r.data))
            np.testing.assert_array_equal(host(p.data), host(r.data).astype(dtype))
            assert all(host(v).dtype == np.float32 for k, v in mixed.state[i].items()
                       if k in mixed.buffers)


def test_an_update_below_half_an_ulp_is_kept_in_the_master(xp):
    """1 + 10⁻⁴ is 1 in fp16 (ulp 2⁻¹⁰ ≈ 10⁻³): stepping the fp16 weight itself loses every
    update; the master gathers them until the weight moves (§3.1)."""
    low = Parameter(on_device(np.ones(4), np.float16))
    direct = Parameter(on_device(np.ones(4), np.float16))
    mixed, plain = MixedPrecision(SGD([low], 1e-4)), SGD([direct], 1e-4)
    for _ in range(20):
        low.grad = on_device(-np.ones(4), np.float16)
        direct.grad = on_device(-np.ones(4), np.float16)
        mixed.step()
        plain.step()
    np.testing.assert_array_equal(host(direct.data), np.ones(4))  # every update lost
    np.testing.assert_allclose(host(mixed.state[0]["master"]), 1.002, rtol=1e-6)
    np.testing.assert_array_equal(host(low.data), np.float16(1.002))


def test_an_overflow_is_skipped_and_halves_the_scale(xp):
    params = [Parameter(on_device(np.arange(4.0), np.float16))]
    mixed = MixedPrecision(AdamW(params, 1e-2), LossScaler(scale=1024.0))
    params[0].grad = on_device(np.full(4, 512.0), np.float16)
    guarded_step(mixed, params, 1.5)  # applied: the state exists
    before = [host(params[0].data).copy()] + [host(v).copy() for v in mixed.state[0].values()
                                              if hasattr(v, "shape")]
    params[0].grad = on_device(np.array([1.0, np.inf, 2.0, 3.0]), np.float16)
    metrics = guarded_step(mixed, params, 1.5)
    assert metrics["skipped"] and metrics["overflow"] and mixed.grad_scale == 512.0
    after = [host(params[0].data)] + [host(v) for v in mixed.state[0].values()
                                      if hasattr(v, "shape")]
    for b, a in zip(before, after):
        np.testing.assert_array_equal(b, a)


def test_the_reported_norm_and_the_clip_are_the_unscaled_gradients(xp):
    params = [Parameter(on_device(np.zeros(2), np.float16))]
    mixed = MixedPrecision(SGD(params, 1.0), LossScaler(scale=1024.0))
    params[0].grad = on_device(np.array([3.0, 4.0]) * 1024.0, np.float16)  # ‖∇‖ = 5
    metrics = guarded_step(mixed, params, 0.5, grad_clip=1.0)
    assert metrics["grad_norm"] == pytest.approx(5.0)
    np.testing.assert_allclose(host(mixed.state[0]["master"]), [-0.6, -0.8], rtol=1e-3)


def test_at_the_floor_an_overflow_is_divergence(xp):
    params = [Parameter(on_device(np.zeros(2), np.float16))]
    mixed = MixedPrecision(SGD(params, 1.0), LossScaler(scale=1.0))
    params[0].grad = on_device(np.array([np.nan, 1.0]), np.float16)
    metrics = guarded_step(mixed, params, 0.5)
    assert metrics["skipped"] and "overflow" not in metrics


def test_the_state_reloads_in_fp32_and_a_rebind_shares_the_scale(xp):
    params = [Parameter(on_device(np.linspace(-1, 1, 6), np.float16))]
    scaler = LossScaler(scale=8.0)
    mixed = MixedPrecision(AdamW(params, 1e-3), scaler)
    params[0].grad = on_device(np.full(6, 8.0), np.float16)
    mixed.step()
    saved = {k: (host(v).copy() if hasattr(v, "shape") else v)
             for k, v in mixed.state_dict().items()}
    assert saved["master.0"].dtype == np.float32 and {"exp_avg.0", "step.0"} <= set(saved)
    twin = MixedPrecision(AdamW([Parameter(on_device(np.zeros(6), np.float16))], 1e-3), scaler)
    twin.load_state_dict(saved)
    for k, v in twin.state_dict().items():
        if hasattr(v, "shape"):
            assert v.dtype == np.float32
            np.testing.assert_array_equal(host(v), saved[k])
    shard = mixed.rebind([Parameter(on_device(np.ones(3), np.float16))])
    assert shard.scaler is scaler and shard.step_count == 1 and not any(shard.state)
