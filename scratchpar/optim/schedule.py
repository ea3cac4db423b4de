"""Learning-rate schedules: frozen dataclasses that map a step number to a learning rate."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real


@dataclass(frozen=True)
class Constant:
    """The same learning rate at every step."""

    lr: float

    def __post_init__(self):
        _check_lr("lr", self.lr)

    def __call__(self, step: int) -> float:
        _check_step(step)
        return self.lr


@dataclass(frozen=True)
class _WarmupDecay:
    """Linear warmup to ``base_lr`` over ``warmup_steps``, a decay to ``min_lr`` at ``total_steps``.

    Steps ``0 … warmup_steps − 1`` rise linearly, ``base_lr·(s + 1)/(warmup_steps + 1)``. Step
    ``warmup_steps`` is ``base_lr``. The decay ends at ``min_lr`` on step ``total_steps``, which
    holds from then on. A subclass gives the decay's shape on progress ∈ [0, 1).
    """

    base_lr: float
    warmup_steps: int
    total_steps: int
    min_lr: float = 0.0

    def __post_init__(self):
        _check_lr("base_lr", self.base_lr)
        _check_lr("min_lr", self.min_lr)
        if self.min_lr > self.base_lr:
            raise ValueError(f"min_lr ({self.min_lr}) must not exceed base_lr ({self.base_lr})")
        for name in ("warmup_steps", "total_steps"):
            value = getattr(self, name)
            if not isinstance(value, Integral) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if self.total_steps < 1:
            raise ValueError(f"total_steps must be >= 1, got {self.total_steps}")
        if self.warmup_steps > self.total_steps:
            raise ValueError(
                f"warmup_steps ({self.warmup_steps}) must not exceed total_steps "
                f"({self.total_steps})"
            )

    def __call__(self, step: int) -> float:
        _check_step(step)
        if step < self.warmup_steps:
            return self.base_lr * (step + 1) / (self.warmup_steps + 1)  # Goyal et al. 2017 §2.2
        if step >= self.total_steps:
            return self.min_lr
        progress = (step - self.warmup_steps) / (self.total_steps - self.warmup_steps)
        return self.min_lr + (self.base_lr - self.min_lr) * self._shape(progress)

    def _shape(self, progress: float) -> float:
        raise NotImplementedError


@dataclass(frozen=True)
class WarmupCosine(_WarmupDecay):
    """Linear warmup, then cosine annealing to ``min_lr`` (Loshchilov & Hutter 2017, SGDR)."""

    def _shape(self, progress: float) -> float:
        return 0.5 * (1.0 + math.cos(math.pi * progress))  # SGDR eq. 5, one cycle


@dataclass(frozen=True)
class WarmupLinear(_WarmupDecay):
    """Linear warmup, then linear decay to ``min_lr``."""

    def _shape(self, progress: float) -> float:
        return 1.0 - progress


def linear_scaling(base_lr: float, base_batch: int, batch: int) -> float:
    """The learning rate for ``batch`` given ``base_lr`` tuned at ``base_batch``."""
    _check_lr("base_lr", base_lr)
    for name, value in (("base_batch", base_batch), ("batch", batch)):
        if not isinstance(value, Integral) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return base_lr * batch / base_batch  # Goyal et al. 2017 §2.1: batch ×k ⇒ lr ×k


def _check_lr(name: str, lr: float) -> None:
    if not (isinstance(lr, Real) and math.isfinite(lr) and lr >= 0.0):
        raise ValueError(f"{name} must be a finite number >= 0, got {lr!r}")


def _check_step(step: int) -> None:
    if not isinstance(step, Integral) or isinstance(step, bool) or step < 0:
        raise ValueError(f"step must be a non-negative integer, got {step!r}")
