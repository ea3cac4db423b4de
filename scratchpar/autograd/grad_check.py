"""Gradient check by central differences in float64: the oracle for every op and layer."""

from __future__ import annotations

import numpy as np

from ..backend import get_array_module
from .tensor import Tensor


def numerical_grad(fn, inputs: list[Tensor], weights, eps: float = 1e-6) -> list:
    """d/dx Σ(weights ⊙ fn(*inputs)) for each input, by (f(x+ε) − f(x−ε)) / 2ε per entry."""
    grads = []
    for x in inputs:
        xp = get_array_module(x.data)
        grad = xp.zeros_like(x.data)
        flat, gflat = x.data.reshape(-1), grad.reshape(-1)
        for i in range(flat.size):
            orig = flat[i].item()
            flat[i] = orig + eps
            plus = float((fn(*inputs).data * weights).sum())
            flat[i] = orig - eps
            minus = float((fn(*inputs).data * weights).sum())
            flat[i] = orig
            gflat[i] = (plus - minus) / (2 * eps)
        grads.append(grad)
    return grads


def grad_check(fn, inputs: list[Tensor], eps: float = 1e-6, rtol: float = 1e-5,
               atol: float = 1e-7, seed: int = 0) -> None:
    """Raise AssertionError unless backward's grads of ``fn`` match central differences.

    ``inputs`` must be float64 Tensors with ``requires_grad``. A non-scalar output is reduced
    with fixed random weights, so every output entry's gradient path is checked.
    """
    for x in inputs:
        if x.dtype != np.float64:
            raise ValueError(f"grad_check needs float64 inputs, got {x.dtype}")
        x.grad = None
    out = fn(*inputs)
    xp = get_array_module(out.data)
    weights = xp.asarray(np.random.default_rng(seed).standard_normal(out.shape))
    out.backward(weights)
    analytic = [x.grad if x.grad is not None else xp.zeros_like(x.data) for x in inputs]
    numeric = numerical_grad(fn, inputs, weights, eps)
    for k, (a, n) in enumerate(zip(analytic, numeric)):
        if not xp.allclose(a, n, rtol=rtol, atol=atol):
            err = float(abs(a - n).max())
            raise AssertionError(f"input {k}: autograd and numeric grads differ by {err:.3e}\n"
                                 f"autograd: {a}\nnumeric:  {n}")
