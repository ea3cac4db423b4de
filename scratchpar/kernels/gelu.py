"""GELU as one kernel each way (Hendrycks & Gimpel 2016, §2, the tanh approximation): a·σ(2u)
with u = √(2/π)·(a + 0.044715·a³), and its derivative σ·(1 + a·(1 − σ)·2u′), where the plain
op (``autograd/ops_math.py: GELU``) runs nine array operations forward and ten back."""

from __future__ import annotations

from .cuda import Pointwise

C, K = 0.7978845608028654, 0.044715  # √(2/π), and the cubic's coefficient

FORWARD = Pointwise("T a", "T out, T sigma", f"""
typedef typename Wide<T>::type A;
const A v = (A)a;
const A s = A(1) / (A(1) + exponential(A({-2 * C!r}) * v * (A(1) + A({K!r}) * v * v)));
out = (T)(v * s);
sigma = (T)s;
""", "scratchpar_gelu_forward")
BACKWARD = Pointwise("T g, T a, T sigma", "T grad", f"""
typedef typename Wide<T>::type A;
const A v = (A)a, s = (A)sigma;
const A slope = A({2 * C!r}) * (A(1) + A({3 * K!r}) * v * v);
grad = (T)((A(1) + v * slope * (A(1) - s)) * s * (A)g);
""", "scratchpar_gelu_backward")


def forward(a):
    """a → (GELU(a), σ(2u)), both like a."""
    return FORWARD(a)


def backward(g, a, sigma):
    """∂L/∂out g, forward's a and σ → ∂L/∂a."""
    return BACKWARD(g, a, sigma)
