"""A pipeline's schedule as the training command builds it from its flags, what it stashes at
most, and why flags cannot make one, in the command line's words."""

from __future__ import annotations

import functools
import math

from ...parallel.pipeline import schedules, simulator, steady


def costs_of(text: str) -> tuple[float, ...]:
    """``--pp-costs`` "1:2:1" as (1.0, 2.0, 1.0); () where it does not parse."""
    try:
        return tuple(float(part) for part in text.split(":"))
    except ValueError:
        return ()


def built(t) -> dict:
    """The schedule of the flags ``t`` (``cfg.train``)."""
    return schedules.build(t.pp_schedule, t.pp, t.m, t.virtual, t.costs)


@functools.cache
def peak_stash(name: str, p: int, m: int, v: int, costs: tuple) -> int:
    """The most (micro-batch, chunk) pairs a stage of the schedule holds at once (kept: a
    planner asks it of one schedule for many layouts; from a few micro-batches where the
    schedule repeats by then, ``steady.py``)."""
    return int(max(steady.at(lambda s: tuple(simulator.peak_stash(s).values()), [0] * p,
                             name, p, m, v, costs)))


FLAG_WORDS = {  # each unmet requirement of a schedule, in the command line's words
    "schedule": "--pp-schedule {name!r} is not a schedule; choose one of {names}",
    "stages": "--pp must be at least 1 (got {p})",
    "micro-batches": "--microbatches must be at least 1 (got {m})",
    "one micro-batch": "--pp-schedule naive runs one micro-batch: --microbatches must be 1 "
                       "(got {m}); use gpipe or 1f1b for more",
    "chunks": "--pp-schedule interleaved needs --virtual 2 or more model chunks per rank "
              "(got {v})",
    "one chunk": "--virtual {v} applies only to --pp-schedule interleaved; {name} needs "
                 "--virtual 1",
}


def schedule_problems(t) -> list[str]:
    """Every reason why the flags ``t`` (``cfg.train``) cannot build their schedule."""
    names = ", ".join(schedules.SCHEDULES)
    problems = [FLAG_WORDS[u.rule].format(**u._asdict(), names=names)
                for u in schedules.unmet(t.pp_schedule, t.pp, t.m, t.virtual)]
    forward, backward, weight = t.costs if len(t.costs) == 3 else (0, 0, 0)
    if not (forward > 0 and 0 < weight < backward and math.isfinite(forward + backward)):
        problems.append(f"--pp-costs {t.pp_costs!r}: give forward:backward:weight, three "
                        "finite positive numbers with the weight gradient's less than the "
                        "backward that includes it (e.g. 1:2:1)")
    elif t.costs != schedules.UNIT_COSTS and t.pp_schedule not in schedules.COSTED:
        problems.append(f"--pp-costs applies to --pp-schedule bprio and zb-h1, which order "
                        f"their actions by costs; {t.pp_schedule} does not")
    return problems
