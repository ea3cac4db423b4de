"""One parameter's Adam or AdamW update as one kernel (Kingma & Ba 2015, Algorithm 1;
Loshchilov & Hutter 2019, Algorithm 2), where the plain update (``optim/adam.py``) runs about
ten array operations. Each step rounds in the plain update's order, and the compiler is told
not to fuse a product and a sum into one rounding (``--fmad=false``), so the fused update
equals the plain one bit for bit."""

from __future__ import annotations

from .cuda import Pointwise

UPDATE = Pointwise("T g, float64 l2, float64 decay, float64 beta1, float64 rest1, float64 beta2, "
                   "float64 rest2, float64 root, float64 eps, float64 rate", "T p, T m, T v", """
T grad = g;
if (l2 != 0) grad = p * (T)l2 + g;          // Adam's L2 decay: ∇ + λθ, in the gradient
p = p * (T)decay;                           // AdamW's decoupled decay: θ ← (1 − lr·λ)θ
m = m * (T)beta1 + grad * (T)rest1;         // m ← β₁m + (1 − β₁)g
v = v * (T)beta2 + grad * grad * (T)rest2;  // v ← β₂v + (1 − β₂)g²
T step = sqrt(v) / (T)root + (T)eps;        // √v̂ + ε, v̂ = v/(1 − β₂ᵗ)
p = p - m / step * (T)rate;                 // θ ← θ − lr·m̂/(√v̂ + ε), m̂ = m/(1 − β₁ᵗ)
""", "scratchpar_adam", ("--fmad=false",))


def step(p, g, m, v, *, beta1: float, beta2: float, eps: float, rate: float, root: float,
         l2: float = 0.0, decay: float = 1.0) -> None:
    """θ = ``p``, m and v in place, along ``g``: ``rate`` = lr/(1 − β₁ᵗ), ``root`` = √(1 − β₂ᵗ),
    ``l2`` Adam's λ (0: none), ``decay`` AdamW's 1 − lr·λ (1: none)."""
    UPDATE(g, l2, decay, beta1, 1.0 - beta1, beta2, 1.0 - beta2, root, eps, rate, p, m, v)
