"""A mixture of experts in place of a block's feed-forward layer: a router sends each token to k
of E experts, and the token's output is their outputs weighted by its router probabilities
(Shazeer et al. 2017; Lepikhin et al. 2020, GShard; Fedus et al. 2021, Switch Transformer)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from ..autograd import Tensor
from ..autograd import functional as F
from ..backend import get_array_module, to_host
from ..optim.scaler import scaled
from .layers import GELU, Linear
from .module import Module, ModuleList, Parameter, Sequential
from .routing import Share, Tally, assign, count, places, tally, top_k
from .unfilled import part


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
    balancing loss alone.

    The layer's auxiliary losses are terms of the summed objective, its tokens' share of them,
    carried into backward by its output (:func:`~scratchpar.autograd.functional.carry`), with
    fp16's loss scale where it has a ``scaler``: so they train the router under any strategy,
    whichever stage computes the objective. After forward :attr:`aux` is that term (a value to
    check against, not to add) and :attr:`stats` the micro-batch's routing figures.
    ``group`` (``None``: one device) says which ranks hold the micro-batch's other tokens and
    which the experts (:mod:`scratchpar.parallel.experts`); :attr:`experts` are those this
    rank holds."""

    def __init__(self, d_model: int, spec: Experts, gen: np.random.Generator, dtype=np.float32,
                 d_ff: int | None = None):
        self.spec = spec
        wide = 4 * d_model if d_ff is None else d_ff  # each expert's hidden width
        self.router = Linear(d_model, spec.count, gen, bias=False, dtype=dtype)
        self.experts = ModuleList([Sequential(Linear(d_model, wide, gen, dtype=dtype), GELU(),
                                              Linear(wide, d_model, gen, dtype=dtype))
                                   for _ in range(spec.count)])
        self.group, self.scaler, self.aux, self.stats = None, None, None, {}

    def replica(self) -> MixtureOfExperts:
        """A copy with arrays of its own (:func:`~scratchpar.nn.unfilled.part`: an unfilled
        one stays unfilled), the same loss scaler, and no group."""
        memo = {id(p): Parameter(part(p.data)) for p in self.parameters()}
        memo[id(self.scaler)] = self.scaler
        out = copy.deepcopy(self, memo)
        out.group, out.aux, out.stats = None, None, {}
        return out

    def forward(self, x):
        b, t, c = x.shape
        spec, xp, group = self.spec, x.xp, self.group or ALONE
        tokens = x.reshape(b * t, c)  # (N, C)
        logits = F.linear(F.wide(tokens), F.wide(self.router.weight))  # (N, E) in fp32
        probs = F.softmax(logits, axis=-1)
        high = logits.max(axis=-1, keepdims=True)
        lse = F.log(F.exp(logits - high).sum(axis=-1)) + high.reshape(b * t)  # (N,)
        z = (lse * lse).sum()  # Σ over this rank's tokens
        choice = top_k(probs.data, spec.top_k, xp)  # (N, k)
        tally = group.tally(choice, spec, to_host(probs.data.sum(axis=0)), float(z.data), (b, t))
        place = places(choice, spec.count, tally.segments, tally.before, xp)
        routes = assign(choice, place, tally.slots, spec.count, xp)
        chosen = probs[xp.arange(b * t)[:, None], routes.choice]  # (N, k)
        gates = chosen / chosen.sum(-1, keepdims=True) if spec.top_k > 1 else chosen
        ends = group.compute(self.experts, tokens, routes)  # (kept + 1, C): a zero row last
        out = sum(F.astype(gates[:, j:j + 1], x.dtype) * ends[routes.slot[:, j]]
                  for j in range(spec.top_k))  # (N, C): dropped slots read the zero row
        # Fedus et al. 2021, eq. 4, α·E·Σᵢ fᵢ·Pᵢ times N: fᵢ the micro-batch's fraction of
        # assignments to expert i (no gradient), Pᵢ·N its probabilities summed over the
        # micro-batch, of which this rank's tokens give their part
        fraction = xp.asarray(tally.routed / max(spec.top_k * tally.tokens, 1),
                              probs.dtype)  # (E,)
        balance = (probs.sum(axis=0) * fraction).sum() * (spec.balance * spec.count)
        aux = balance + z * spec.z_loss  # Zoph et al. 2022, eq. 5, β·mean(lse²) times N
        self.aux, self.stats = aux, tally.stats
        return F.carry(out, scaled(aux, self.scaler)).reshape(b, t, c)


def figures(stats: list[dict]) -> dict:
    """Sparse layers' routing figures as one: the assignments dropped, the busiest layer's
    load, and the two auxiliary losses, summed; empty for none."""
    stats = [s for s in stats if s]
    if not stats:
        return {}
    return {"dropped": sum(s["dropped"] for s in stats), "load": max(s["load"] for s in stats),
            **{k: sum(s[k] for s in stats) for k in ("balance_loss", "z_loss")}}


class Alone:
    """One device's routing: the micro-batch is this forward's tokens, one segment, and every
    expert is here."""

    def tally(self, choice, spec, probs, z: float, shape) -> Tally:
        n = shape[0] * shape[1]
        segments = np.array([0, n])
        share = Share(np.zeros(1, np.int64), count(choice, spec.count, segments,
                                                   get_array_module(choice)), probs, z, n)
        return tally([share], 0, segments, spec.top_k, spec)

    def compute(self, experts, tokens, routes):
        """(kept + 1, C): each expert's tokens through it, end to end, and a zero row."""
        outs = [expert(tokens[rows]) for expert, rows in zip(experts, routes.rows)]
        zero = Tensor(tokens.xp.zeros((1, tokens.shape[1]), tokens.dtype))
        return F.concat([*outs, zero], axis=0)


ALONE = Alone()

