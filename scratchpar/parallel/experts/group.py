"""The ranks a sparse layer works with: those holding the micro-batch's other tokens, whose
tally of routing makes every rank's drops and balancing loss one device's, and those holding
the other experts, which trade tokens."""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module
from ...nn.moe import ALONE
from ...nn.routing import Share, Tally, count, segments_of, tally
from .dispatch import exchange

CAPACITIES = ("global", "rank")


class ExpertError(ValueError):
    """A sparse layer that the ep group cannot split as asked."""


class ExpertGroup:
    """A sparse layer's ``group`` (:class:`~scratchpar.nn.moe.MixtureOfExperts`).

    ``replicas`` holds the ranks whose tokens make up each micro-batch, in dp-then-cp order (a
    mesh's ``replica_comm``: rank d·cp + c holds replica d's rows at cp rank c's positions,
    ``context``'s, of every sequence). ``ep`` (``None``: every expert here) holds the ranks that
    split the experts, rank r the E/ep from r·E/ep. ``capacity="global"`` counts each expert's
    slots over the micro-batch and serves its assignments in one device's order, so a token is
    dropped exactly where one device drops it; ``"rank"`` counts them over each rank's tokens,
    in its own order (Megatron-LM's and DeepSpeed's default: cheaper, and not one device's)."""

    def __init__(self, replicas, ep=None, context=None, capacity: str = "global"):
        if capacity not in CAPACITIES:
            raise ExpertError(f"capacity {capacity!r} is not one of {', '.join(CAPACITIES)}")
        self.replicas, self.ep, self.context, self.capacity = replicas, ep, context, capacity
        self.cp = context.comm.size if context is not None else 1

    def tally(self, choice, spec, probs, z: float, shape) -> Tally:
        """The micro-batch's tally, from one exchange of every replica rank's share: its rows'
        runs of positions (a position is row·T + t in the micro-batch that joins the replicas'
        rows in dp order, each of T = t·cp positions), their assignments, its router
        probabilities' sum and its z-loss's."""
        b, t = shape
        whole = t * self.cp
        held = self.context.mine(whole) if self.context is not None else np.arange(t)
        positions = (np.arange(b)[:, None] * whole + held).reshape(-1)  # (b·t,) within its rows
        segments = segments_of(positions)
        counts = count(choice, spec.count, segments, get_array_module(choice))
        mine = (self.replicas.rank // self.cp, b, positions[segments[:-1]], counts, probs, z,
                b * t)
        every = self.replicas.allgather_obj(mine, what="expert routing tally")
        rows = dict(sorted((d, n) for d, n, *_ in every))  # each replica's rows, once
        first = dict(zip(rows, np.cumsum([0, *rows.values()])))  # its first row's place
        shares = [Share(first[d] * whole + starts, *rest) for d, _, starts, *rest in every]
        return tally(shares, self.replicas.rank, segments, spec.top_k, spec,
                     per_rank=self.capacity == "rank")

    def compute(self, experts, tokens, routes):
        """(kept + 1, C): each kept assignment's expert output in slot order, then a zero row;
        the experts on other ep ranks reached by :func:`~.dispatch.exchange`."""
        if self.ep is None:
            return ALONE.compute(experts, tokens, routes)
        return exchange(experts, tokens, routes, self.ep)

    def free(self) -> None:
        """Collective: free this group's communicators."""
        self.replicas.free()
        if self.ep is not None:
            self.ep.free()
