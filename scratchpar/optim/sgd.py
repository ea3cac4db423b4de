"""Stochastic gradient descent with optional momentum, Nesterov momentum and L2 weight decay."""

from __future__ import annotations

from scratchpar.backend import get_array_module
from scratchpar.optim.optimizer import Optimizer


class SGD(Optimizer):
    """θ ← θ − lr·d, with the same semantics as ``torch.optim.SGD`` (no dampening).

    g = ∇ + λθ (L2 weight decay λ). With momentum μ: b ← μb + g (b = g on the first step) and
    d = g + μb (Nesterov) or d = b. Without momentum d = g. ``p.grad`` is never modified.
    """

    def __init__(
        self, params, lr: float, momentum: float = 0.0, weight_decay: float = 0.0,
        nesterov: bool = False,
    ):
        super().__init__(params, lr)
        if not momentum >= 0.0:
            raise ValueError(f"momentum must be >= 0, got {momentum}")
        if not weight_decay >= 0.0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        if nesterov and momentum == 0.0:
            raise ValueError("nesterov=True needs momentum > 0")
        self.momentum = float(momentum)
        self.weight_decay = float(weight_decay)
        self.nesterov = nesterov
        self.buffers = ("momentum_buffer",) if momentum else ()

    def _update(self, i: int, p) -> None:
        xp = get_array_module(p.data)
        g = p.grad
        tmp = self._scratch(p.data)
        if self.weight_decay:
            xp.multiply(p.data, self.weight_decay, out=tmp)
            tmp += g  # g = ∇ + λθ: the gradient of the loss plus ½λ‖θ‖²
            g = tmp
        if self.momentum:
            buf = self.state[i].get("momentum_buffer")
            if buf is None:
                buf = self.state[i]["momentum_buffer"] = g.copy()  # b₁ = g₁
            else:
                buf *= self.momentum
                buf += g  # b ← μb + g: heavy-ball momentum (Polyak 1964)
            if self.nesterov:
                d = self._scratch(p.data, slot=1)
                xp.multiply(buf, self.momentum, out=d)
                d += g  # d = g + μb: Nesterov momentum in torch.optim.SGD's form
                g = d
            else:
                g = buf
        xp.multiply(g, self.lr, out=tmp)
        p.data -= tmp  # θ ← θ − lr·d
