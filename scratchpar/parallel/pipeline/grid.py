"""A schedule's timeline as text: a row per rank, a column per time unit, the compute in each."""

from __future__ import annotations

import math
from fractions import Fraction

from .actions import Schedule
from .simulator import Timeline, simulate

IDLE = "·"


def exact(x: float) -> Fraction:
    return Fraction(x).limit_denominator(10**6)


def grain(durations: list[float]) -> Fraction:
    """The largest unit that every duration is a whole number of (their gcd, as fractions)."""
    fractions = [exact(d) for d in durations]
    denominator = math.lcm(*(f.denominator for f in fractions))
    return Fraction(math.gcd(*(f.numerator * denominator // f.denominator for f in fractions)),
                    denominator)


def format_grid(timeline: Timeline | Schedule, unit: float | None = None) -> str:
    """One row per rank, one column per ``unit`` of time (default: the largest unit that every
    compute's duration is a multiple of), each cell the compute running then (``F3``, ``B3``,
    ``F3.1`` for chunk 1, ``W3``, ``S`` for a STEP that takes time) or ``·`` idle. A schedule is
    simulated first with ``simulate``'s default costs."""
    if not isinstance(timeline, Timeline):
        timeline = simulate(timeline)
    spans = [(r, s) for r, row in timeline.spans.items() for s in row
             if not s.action.is_comm and s.end > s.start]
    if not spans:
        return "(nothing to draw: no compute takes time)"
    step = exact(unit) if unit else grain([s.end - s.start for _, s in spans])
    if step <= 0:
        raise ValueError(f"the grid's unit must be positive, got {unit}")
    columns = math.ceil(exact(timeline.makespan) / step)
    cells = {r: [IDLE] * columns for r in timeline.spans}
    for r, s in spans:
        label = "S" if s.action.kind == "STEP" else str(s.action)
        for c in range(round(exact(s.start) / step), round(exact(s.end) / step)):
            cells[r][c] = label
    width = max(len(label) for row in cells.values() for label in row)
    lines = [f"rank {r} │ " + " ".join(label.ljust(width) for label in row).rstrip()
             for r, row in sorted(cells.items())]
    lines.append(f"{columns} columns of {float(step):g} · makespan {float(timeline.makespan):g}"
                 f" · bubble {float(timeline.bubble):.1%}")
    return "\n".join(lines)
