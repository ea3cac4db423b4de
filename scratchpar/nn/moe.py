"""A mixture of experts in place of a block's feed-forward layer: a router sends each token to k
of E experts, and the token's output is their outputs weighted by its router probabilities
(Shazeer et al. 2017; Lepikhin et al. 2020, GShard; Fedus et al. 2021, Switch Transformer)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..autograd import Tensor
from ..autograd import functional as F
from .layers import GELU, Linear
from .module import Module, ModuleList, Sequential
from .routing import capacity, route


@dataclass(frozen=True)
class Experts:
    """A sparse feed-forward layer's shape: ``count`` experts, ``top_k`` a token, slots of
    ``capacity_factor`` (0: dropless), the balancing loss's α and the router z-loss's β."""

    count: int
    top_k: int = 2
    capacity_factor: float = 1.0
    balance: float = 0.01
    z_loss: float = 0.001


class MixtureOfExperts(Module):
    """(B, T, C) → (B, T, C): each token through its k experts (each C → 4C → C, GELU, as the
    dense block's feed-forward layer), their outputs summed with its gates.

    The router is a linear layer computed in fp32 whatever the run's precision, with a softmax
    over the experts (Fedus et al. 2021, §2.4, "selective precision"). The gates are the k
    chosen probabilities renormalized over them (Mixtral, Jiang et al. 2024, §2.1) where k > 1;
    a single choice keeps its probability (Switch, eq. 2), or the router would learn from the
    balancing loss alone. After forward :attr:`aux` is the layer's auxiliary loss and
    :attr:`stats` its routing figures, both of this batch."""

    def __init__(self, d_model: int, spec: Experts, gen: np.random.Generator, dtype=np.float32):
        self.spec = spec
        self.router = Linear(d_model, spec.count, gen, bias=False, dtype=dtype)
        self.experts = ModuleList([Sequential(Linear(d_model, 4 * d_model, gen, dtype=dtype),
                                              GELU(), Linear(4 * d_model, d_model, gen,
                                                             dtype=dtype))
                                   for _ in range(spec.count)])
        self.aux, self.stats = None, {}

    def forward(self, x):
        b, t, c = x.shape
        tokens = x.reshape(b * t, c)  # (N, C)
        logits = F.linear(F.wide(tokens), F.wide(self.router.weight))  # (N, E) in fp32
        probs = F.softmax(logits, axis=-1)
        spec, xp = self.spec, x.xp
        routes = route(probs.data, spec.top_k, capacity(b * t, spec.top_k, spec.count,
                                                        spec.capacity_factor), xp)
        chosen = probs[xp.arange(b * t)[:, None], routes.choice]  # (N, k)
        gates = chosen / chosen.sum(-1, keepdims=True) if spec.top_k > 1 else chosen
        outs = [expert(tokens[rows]) for expert, rows in zip(self.experts, routes.rows)]
        zero = Tensor(xp.zeros((1, c), x.dtype))  # what a dropped assignment reads
        ends = F.concat([*outs, zero], axis=0)  # (kept + 1, C): the experts' rows end to end
        out = sum(F.astype(gates[:, j:j + 1], x.dtype) * ends[routes.slot[:, j]]
                  for j in range(spec.top_k))  # (N, C): dropped slots read the zero row
        self.aux, self.stats = self._losses(logits, probs, routes)
        return out.reshape(b, t, c)

    def _losses(self, logits, probs, routes):
        """The balancing loss α·E·Σᵢ fᵢ·Pᵢ, fᵢ the fraction of assignments routed to expert i
        and Pᵢ its mean router probability (Fedus et al. 2021, eq. 4), and the router z-loss
        β·mean(log Σⱼ e^{xⱼ})² (Zoph et al. 2022, ST-MoE, eq. 5); and the figures: assignments
        dropped, and the load, the busiest expert's assignments over the mean."""
        spec, n = self.spec, probs.shape[0]
        fraction = routes.routed / max(spec.top_k * n, 1)  # (E,), no gradient
        balance = (probs.mean(axis=0) * fraction).sum() * (spec.balance * spec.count)
        high = logits.max(axis=-1, keepdims=True)
        lse = F.log(F.exp(logits - high).sum(axis=-1)) + high.reshape(n)  # (N,)
        z = (lse * lse).mean() * spec.z_loss
        load = float(routes.routed.max() / max(routes.routed.mean(), 1e-12))
        return balance + z, {"dropped": routes.dropped, "load": load,
                             "balance_loss": float(balance.data), "z_loss": float(z.data)}
