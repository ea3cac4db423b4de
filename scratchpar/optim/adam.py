"""Adam (Kingma & Ba 2015) with L2 weight decay, and AdamW with decoupled weight decay."""

from __future__ import annotations

import math

from scratchpar import kernels
from scratchpar.backend import get_array_module
from scratchpar.kernels import adam_many
from scratchpar.optim.optimizer import Optimizer


class Adam(Optimizer):
    """Adam as in ``torch.optim.Adam``: Kingma & Ba 2015, Algorithm 1, with L2 weight decay λ.

    Each parameter keeps its own step count t (a step without a gradient does not advance it), the
    moments m and v in the parameter's dtype, and is updated by θ ← θ − lr·m̂/(√v̂ + ε).
    """

    buffers = ("exp_avg", "exp_avg_sq")
    counters = ("step",)

    def __init__(
        self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8, weight_decay: float = 0.0,
    ):
        super().__init__(params, lr)
        for beta in betas:
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"betas must lie in [0, 1), got {betas}")
        if not eps >= 0.0:
            raise ValueError(f"eps must be >= 0, got {eps}")
        if not weight_decay >= 0.0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(eps)
        self.weight_decay = float(weight_decay)

    def decays(self) -> tuple[float, float]:
        """(λ of the L2 decay added to the gradient, the factor decoupled decay multiplies θ
        by): Adam's (λ, 1)."""
        return self.weight_decay, 1.0

    def step(self) -> None:
        live = [(i, p) for i, p in enumerate(self.params) if p.grad is not None]
        if not launchable([(p.data, p.grad) for _, p in live], "fd"):
            return super().step()
        self.step_count += 1
        self.step_many([(i, p.data, p.grad, None) for i, p in live])

    def step_many(self, items, unscale: float = 1.0) -> None:
        """Every item's update in one launch (``kernels/adam_many.py``), bit for bit: (i, the
        parameter's array, its gradient, its fp32 master or None), the gradient multiplied by
        ``unscale`` first where there is a master."""
        beta1, beta2 = self.betas
        states = [self._state(i, data if master is None else master)
                  for i, data, _, master in items]
        l2, decay = self.decays()
        adam_many.step([data for _, data, _, _ in items], [grad for _, _, grad, _ in items],
                       [m for _, m, _ in states], [v for _, _, v in states],
                       [master for _, _, _, master in items],
                       [self.lr / (1.0 - beta1**t) for t, _, _ in states],
                       [math.sqrt(1.0 - beta2**t) for t, _, _ in states], unscale=unscale,
                       l2=l2, decay=decay, beta1=beta1, beta2=beta2, eps=self.eps)

    def _update(self, i: int, p) -> None:
        g = p.grad
        if self.weight_decay:
            g = self._scratch(p.data, slot=1)
            get_array_module(g).multiply(p.data, self.weight_decay, out=g)
            g += p.grad  # g = ∇ + λθ: L2 weight decay inside the gradient
        self._adam(i, p, g)

    def _state(self, i: int, like) -> tuple[int, object, object]:
        """Parameter i's step count t, advanced, and its moments m and v, shaped ``like`` the
        array the rule updates."""
        state = self.state[i]
        if "step" not in state:  # its first update (a mixed-precision master may be there)
            xp = get_array_module(like)
            state.update(step=0, exp_avg=xp.zeros_like(like), exp_avg_sq=xp.zeros_like(like))
        state["step"] += 1
        return state["step"], state["exp_avg"], state["exp_avg_sq"]

    def _adam(self, i: int, p, g) -> None:
        """One Adam step of parameter i along g (p.grad or a scratch array; neither is changed)."""
        xp = get_array_module(p.data)
        t, m, v = self._state(i, p.data)
        beta1, beta2 = self.betas
        tmp = self._scratch(p.data)
        m *= beta1
        xp.multiply(g, 1.0 - beta1, out=tmp)
        m += tmp  # m ← β₁m + (1 − β₁)g  (Algorithm 1)
        v *= beta2
        xp.multiply(g, g, out=tmp)
        tmp *= 1.0 - beta2
        v += tmp  # v ← β₂v + (1 − β₂)g²  (Algorithm 1)
        xp.sqrt(v, out=tmp)
        tmp /= math.sqrt(1.0 - beta2**t)
        tmp += self.eps  # √v̂ + ε, with v̂ = v/(1 − β₂ᵗ)  (Algorithm 1)
        xp.divide(m, tmp, out=tmp)
        tmp *= self.lr / (1.0 - beta1**t)
        p.data -= tmp  # θ ← θ − lr·m̂/(√v̂ + ε), with m̂ = m/(1 − β₁ᵗ)  (Algorithm 1)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019, Algorithm 2), as in torch."""

    def __init__(
        self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8, weight_decay: float = 0.01,
    ):
        super().__init__(params, lr, betas, eps, weight_decay)

    def decays(self) -> tuple[float, float]:
        """AdamW's: no L2 term, θ multiplied by 1 − lr·λ."""
        return 0.0, 1.0 - self.lr * self.weight_decay

    def _update(self, i: int, p) -> None:
        if self.weight_decay:
            p.data *= 1.0 - self.lr * self.weight_decay  # θ ← (1 − lr·λ)θ, apart from the gradient
        self._adam(i, p, p.grad)


def launchable(pairs, dtypes: str) -> bool:
    """Whether every (parameter, gradient) array pair goes to one fused launch: the fused ops
    on, all on a GPU, all of one dtype among ``dtypes`` (NumPy's type codes)."""
    return (bool(pairs) and kernels.fused(pairs[0][0])
            and len({(a.dtype, b.dtype) for a, b in pairs}) == 1
            and pairs[0][0].dtype == pairs[0][1].dtype and pairs[0][0].dtype.char in dtypes
            and all(kernels.on_gpu(a, b) for a, b in pairs))
