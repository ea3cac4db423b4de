"""Learning-rate schedules (endpoints, monotonicity, validation) and the linear scaling rule."""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.optim import Constant, WarmupCosine, WarmupLinear, linear_scaling

SCHEDULES = [WarmupCosine, WarmupLinear]


@st.composite
def arguments(draw):
    total = draw(st.integers(1, 300))
    warmup = draw(st.integers(0, total))
    base_lr = draw(st.floats(1e-5, 10.0))
    min_lr = draw(st.floats(0.0, 1.0)) * base_lr
    return base_lr, warmup, total, min_lr


@pytest.mark.parametrize("cls", SCHEDULES)
@given(args=arguments())
def test_shape(cls, args):
    base_lr, warmup, total, min_lr = args
    schedule = cls(base_lr, warmup, total, min_lr)
    lrs = np.array([schedule(s) for s in range(total + 5)])
    tol = 1e-12 * base_lr
    warm, decay = lrs[:warmup], lrs[warmup:]
    assert np.all(np.diff(warm) > 0)  # warmup rises strictly …
    assert np.all((warm > 0) & (warm < base_lr))  # … from near zero, below base_lr
    if warmup > 0:
        assert lrs[0] == pytest.approx(base_lr / (warmup + 1), rel=1e-12)
    if warmup < total:
        assert decay[0] == pytest.approx(base_lr, rel=1e-12)  # … up to base_lr
    assert np.all(np.diff(decay) <= tol)  # then never rises again
    assert np.all((decay >= min_lr - tol) & (decay <= base_lr + tol))
    assert np.all(lrs[total:] == min_lr)  # flat from total_steps on


def test_warmup_cosine_by_hand():
    schedule = WarmupCosine(base_lr=1.0, warmup_steps=3, total_steps=11, min_lr=0.2)
    assert [schedule(s) for s in range(3)] == [0.25, 0.5, 0.75]
    assert schedule(3) == 1.0
    assert schedule(7) == pytest.approx(0.6)  # halfway through the decay: the mean of the ends
    assert schedule(5) == pytest.approx(0.2 + 0.8 * 0.5 * (1 + math.cos(math.pi / 4)))
    assert schedule(11) == schedule(1000) == 0.2


def test_warmup_linear_by_hand():
    schedule = WarmupLinear(base_lr=2.0, warmup_steps=1, total_steps=5)
    assert [schedule(s) for s in range(7)] == pytest.approx([1.0, 2.0, 1.5, 1.0, 0.5, 0.0, 0.0])


@pytest.mark.parametrize("cls", SCHEDULES)
def test_no_warmup_starts_at_base_lr(cls):
    assert cls(0.1, 0, 10)(0) == 0.1


@pytest.mark.parametrize("cls", SCHEDULES)
def test_warmup_over_the_whole_run(cls):
    schedule = cls(1.0, 4, 4, min_lr=0.1)
    assert [schedule(s) for s in range(6)] == pytest.approx([0.2, 0.4, 0.6, 0.8, 0.1, 0.1])


def test_constant():
    assert [Constant(0.3)(s) for s in (0, 1, 10**9)] == [0.3, 0.3, 0.3]


@pytest.mark.parametrize("cls", SCHEDULES)
def test_frozen_and_comparable(cls):
    schedule = cls(0.1, 5, 50)
    with pytest.raises(dataclasses.FrozenInstanceError):
        schedule.base_lr = 1.0
    assert schedule == cls(0.1, 5, 50) and hash(schedule) == hash(cls(0.1, 5, 50))
    assert schedule != cls(0.1, 5, 51)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((-0.1, 0, 10), "base_lr"),
        ((float("nan"), 0, 10), "base_lr"),
        ((float("inf"), 0, 10), "base_lr"),
        ((0.1, 0, 10, -0.01), "min_lr"),
        ((0.1, 0, 10, 0.2), "min_lr"),
        ((0.1, -1, 10), "warmup_steps"),
        ((0.1, 11, 10), "warmup_steps"),
        ((0.1, 0, 0), "total_steps"),
        ((0.1, 2.5, 10), "warmup_steps"),
        ((0.1, 0, 10.0), "total_steps"),
        (("0.1", 0, 10), "base_lr"),
    ],
)
@pytest.mark.parametrize("cls", SCHEDULES)
def test_invalid_arguments(cls, args, match):
    with pytest.raises(ValueError, match=match):
        cls(*args)


@pytest.mark.parametrize("step", [-1, 1.5, True])
@pytest.mark.parametrize("schedule", [Constant(0.1), WarmupCosine(0.1, 2, 10)])
def test_invalid_step(schedule, step):
    with pytest.raises(ValueError, match="step"):
        schedule(step)


def test_constant_validates():
    with pytest.raises(ValueError, match="lr"):
        Constant(-1.0)


def test_linear_scaling():
    assert linear_scaling(0.1, 256, 8192) == pytest.approx(3.2)  # Goyal et al.: k = 32
    assert linear_scaling(0.1, 256, 256) == 0.1
    assert linear_scaling(0.4, 64, 16) == pytest.approx(0.1)


@given(base_lr=st.floats(1e-6, 10.0), base=st.integers(1, 4096), k=st.integers(1, 64))
def test_linear_scaling_multiplies_by_k(base_lr, base, k):
    assert linear_scaling(base_lr, base, k * base) == pytest.approx(k * base_lr, rel=1e-12)


@pytest.mark.parametrize(
    "args", [(-0.1, 256, 512), (0.1, 0, 512), (0.1, 256, 0), (0.1, 256.0, 512), (0.1, 256, -2)]
)
def test_linear_scaling_validates(args):
    with pytest.raises(ValueError):
        linear_scaling(*args)
