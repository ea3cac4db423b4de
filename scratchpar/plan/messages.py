"""The time of the messages a strategy's description names, on a cluster's links.

Each message kind costs what its algorithm sends one after another on a rank's critical path
(Hockney 1994: α + n·β per message, γ per byte a rank adds into its buffer):

- all-reduce, the ring (Patarasuk & Yuan 2009): 2(p−1) steps of n/p bytes, half of them
  reducing: 2(p−1)·α + 2(p−1)/p·n·β + (p−1)/p·n·γ (Thakur, Rabenseifner & Gropp 2005, §2);
- reduce-scatter: its first half, (p−1)·α + (p−1)/p·n·(β + γ);
- all-gather: its second half, (p−1)·α + (p−1)/p·n·β;
- all-to-all, the pairwise exchange (Thakur, Rabenseifner & Gropp 2005, §3): p−1 steps of n/p
  bytes, (p−1)·α + (p−1)/p·n·β;
- a point-to-point message (a pipeline's activation, a server's push or pull, a header, a
  one-sided get): α + n·β; a one-sided accumulate adds on the owner too: α + n·(β + γ).

A collective among p = 1 ranks sends nothing. Among more, each call also costs the engine's
own time beyond its messages (its planning, buffers and handle), measured by calibration.
"""

from __future__ import annotations

from ..parallel.description import Description, Message
from .profile import Link, Profile

POINT_TO_POINT = ("send", "recv", "push", "pull", "header", "report", "get")


def seconds(message: Message, p: int, link: Link, gamma_s_per_byte: float,
            call_s: float = 0.0) -> float:
    """One step's time of ``message`` (its ``count`` times) among ``p`` ranks over ``link``;
    a collective call also costs the engine's own ``call_s``."""
    n, a, b, g = message.nbytes, link.alpha_s, link.beta_s_per_byte, gamma_s_per_byte
    share = (p - 1) / p
    if message.op == "all-reduce":
        once = 2 * (p - 1) * a + 2 * share * n * b + share * n * g
    elif message.op == "reduce-scatter":
        once = (p - 1) * a + share * n * (b + g)
    elif message.op in ("all-gather", "all-to-all"):
        once = (p - 1) * a + share * n * b
    elif message.op == "accumulate":
        once = a + n * (b + g)
    elif message.op in POINT_TO_POINT:
        once = a + n * b
    else:
        raise ValueError(f"no cost for a message of kind {message.op!r}")
    if message.op not in POINT_TO_POINT + ("accumulate",):
        once = 0.0 if p == 1 else once + call_s
    return message.count * once


def communication(description: Description, ranks: dict[str, int], profile: Profile,
                  across_nodes: frozenset[str] = frozenset()) -> dict[str, float]:
    """Seconds per step of every message the description names, by the compute each hides
    behind ("forward", "backward", or "" for exposed). ``ranks``: the ranks of each axis the
    messages travel ("world", "dp", "pp", "tp", …); ``across_nodes``: the axes whose ranks
    span nodes, whose messages take the network link."""
    by_phase: dict[str, float] = {}
    for message in description.sends:
        if message.axis not in ranks:
            raise ValueError(f"no rank count for the {message.axis!r} axis of {message.op}")
        link = profile.link(same_node=message.axis not in across_nodes)
        t = seconds(message, ranks[message.axis], link, profile.reduce.gamma_s_per_byte,
                    profile.engine.call_s)
        by_phase[message.behind] = by_phase.get(message.behind, 0.0) + t
    return by_phase
