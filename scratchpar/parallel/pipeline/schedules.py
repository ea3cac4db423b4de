"""The pipeline schedules by name: each one's compute order per rank (``orders.py``), lowered
to a Schedule."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

from . import orders
from .actions import Schedule, ScheduleError
from .lower import lower


def naive(p: int, m: int = 1) -> Schedule:
    """Model distribution (``orders.naive``), one micro-batch, lowered."""
    ensure("naive", p, m, 1)
    return lower(orders.naive(p, m), p)


def gpipe(p: int, m: int) -> Schedule:
    """GPipe (``orders.gpipe``), lowered."""
    ensure("gpipe", p, m, 1)
    return lower(orders.gpipe(p, m), p)


def one_f_one_b(p: int, m: int) -> Schedule:
    """PipeDream-Flush's 1F1B (``orders.one_f_one_b``), lowered."""
    ensure("1f1b", p, m, 1)
    return lower(orders.one_f_one_b(p, m), p)


def pipedream(p: int, m: int) -> Schedule:
    """PipeDream's 1F1B with an update after each backward (``orders.pipedream``), lowered."""
    ensure("pipedream", p, m, 1)
    return lower(orders.pipedream(p, m), p)


def interleaved(p: int, m: int, v: int, forward: float = 1.0, backward: float = 2.0) -> Schedule:
    """Megatron's interleaved 1F1B (``orders.interleaved``), its messages placed for these
    costs."""
    ensure("interleaved", p, m, v)
    return lower(orders.interleaved(p, m, v), p, forward, backward)


def bprio(p: int, m: int, forward: float = 1.0, backward: float = 2.0) -> Schedule:
    """Backward-prioritized list scheduling (``orders.bprio``) for these costs, lowered."""
    ensure("bprio", p, m, 1)
    return lower(orders.bprio(p, m, forward, backward), p, forward, backward)


def zb_h1(p: int, m: int, forward: float = 1.0, backward: float = 2.0,
          weight: float = 1.0) -> Schedule:
    """Zero-bubble ZB-H1 (``orders.zb_h1``) for these costs, lowered."""
    ensure("zb-h1", p, m, 1)
    return lower(orders.zb_h1(p, m, forward, backward, weight), p, forward, backward, weight)


SCHEDULES: dict[str, Callable[..., Schedule]] = {
    "naive": naive, "gpipe": gpipe, "1f1b": one_f_one_b, "interleaved": interleaved,
    "bprio": bprio, "pipedream": pipedream, "zb-h1": zb_h1,
}


class Unmet(NamedTuple):
    """A requirement of schedule ``name`` that (p, m, v) does not meet. ``rule`` names it
    (a key of :data:`WORDS`), and ``str()`` says it in the schedule's own terms: p stages,
    m micro-batches, v model chunks per rank."""

    rule: str
    name: str
    p: int
    m: int
    v: int

    def __str__(self) -> str:
        return WORDS[self.rule].format(**self._asdict(), names=", ".join(SCHEDULES))


WORDS = {
    "schedule": "{name!r} is not a schedule; choose one of {names}",
    "stages": "p, the stages, must be at least 1 (got {p})",
    "micro-batches": "m, the micro-batches, must be at least 1 (got {m})",
    "one micro-batch": "naive runs one micro-batch: m must be 1 (got {m}); use gpipe or 1f1b "
                       "for more",
    "chunks": "interleaved needs v = 2 or more model chunks per rank (got {v})",
    "one chunk": "v = {v} applies only to interleaved; {name} needs v = 1",
}


def unmet(name: str, p: int, m: int, v: int = 1) -> list[Unmet]:
    """Every requirement that schedule ``name`` has and (p, m, v) does not meet."""
    if name not in SCHEDULES:
        return [Unmet("schedule", name, p, m, v)]
    rules = [rule for rule, broken in (
        ("stages", p < 1), ("micro-batches", m < 1),
        ("one micro-batch", name == "naive" and m != 1),
        ("chunks", name == "interleaved" and v < 2),
        ("one chunk", name != "interleaved" and v != 1)) if broken]
    return [Unmet(rule, name, p, m, v) for rule in rules]


def ensure(name: str, p: int, m: int, v: int) -> None:
    """Raise ScheduleError, led by ``name``, with its every unmet requirement at (p, m, v)."""
    why = unmet(name, p, m, v)
    if why:
        raise ScheduleError(f"{name}: " + "; ".join(map(str, why)))


def default_m(p: int) -> int:
    """The micro-batches a pipeline of p stages runs unless told: 2p, enough for 1F1B's
    bubble to shrink (Narayanan et al. 2021, §2.2), and one at one stage, where more would
    only split the batch."""
    return 1 if p == 1 else 2 * p


UNIT_COSTS = (1.0, 2.0, 1.0)  # forward : backward (the weights' gradient in it) : weight
COSTED = {"bprio": 2, "zb-h1": 3}  # the schedules ordered by costs, and how many they take


def build(name: str, p: int, m: int, v: int = 1,
          costs: tuple[float, float, float] = UNIT_COSTS) -> Schedule:
    """The schedule ``name`` for p ranks, m micro-batches and v chunks per rank; bprio and
    zb-h1 planned with ``costs`` (forward, backward, the weight gradient's share of it). The
    lists are the caller's own to edit."""
    ensure(name, p, m, v)
    costs = tuple(costs[:COSTED[name]]) if name in COSTED else ()
    return {r: list(acts) for r, acts in _built(name, p, m, v, costs).items()}


@functools.lru_cache(maxsize=128)
def _built(name: str, p: int, m: int, v: int, costs: tuple) -> Schedule:
    """:func:`build`'s schedule, kept: a pure function of its arguments, which a planner asks
    for again for each layout with the same pipeline. Never handed out, only copies of it."""
    return interleaved(p, m, v) if name == "interleaved" else SCHEDULES[name](p, m, *costs)


def compute_orders(name: str, p: int, m: int, v: int = 1,
                   costs: tuple[float, float, float] = UNIT_COSTS) -> orders.Orders:
    """:func:`build`'s schedule before ``lower`` adds its messages: the same computes in the
    same order, all that an eager makespan and a peak stash read. The lists are the caller's."""
    ensure(name, p, m, v)
    costs = tuple(costs[:COSTED[name]]) if name in COSTED else ()
    return {r: list(acts) for r, acts in _ordered(name, p, m, v, costs).items()}


@functools.lru_cache(maxsize=128)
def _ordered(name: str, p: int, m: int, v: int, costs: tuple) -> orders.Orders:
    """:func:`compute_orders`' orders, kept as :func:`_built` keeps schedules."""
    return orders.ORDERS[name](p, m, *((v,) if name == "interleaved" else costs))
