"""A pure simulator of schedules: check one for every fault (rendezvous messages), or time it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .actions import (
    SENDS,
    Action,
    Schedule,
    ScheduleError,
    chunks,
    matching,
    micro_batches,
    splits_backward,
    virtual_stage,
)
from .checks import counts, malformed, messages, order
from .kept import by_contents


class Span(NamedTuple):
    """One action of a rank and when it ran: a message from its arrival to its rendezvous."""

    action: Action
    start: float
    end: float


@dataclass(frozen=True)
class Timeline:
    """A simulated run: every rank's spans, the makespan, compute time per rank, the idle
    fraction ``bubble`` = 1 − Σ busy / (p · makespan), and the peak number of micro-batch
    chunks each rank holds activations for (forwarded, last backward action not yet done)."""

    spans: dict[int, list[Span]]
    makespan: float
    busy: dict[int, float]
    bubble: float
    peak_stash: dict[int, int]
    p: int
    m: int
    v: int


def replay(schedule: Schedule, step) -> dict[int, int]:
    """Advance every rank through its list, in rounds, until no rank can go on.
    ``step(r, a, pos)`` tries action ``a`` at the head of rank ``r``: it returns the ranks
    whose head it completed (r alone, or both ends of a rendezvous), or none if ``a`` must
    wait. Returns each rank's position: the action it stopped at, or the list's end."""
    pos = dict.fromkeys(schedule, 0)
    progress = True
    while progress:
        progress = False
        for r, acts in schedule.items():
            while pos[r] < len(acts):
                done = step(r, acts[pos[r]], pos)
                if not done:
                    break
                for q in done:
                    pos[q] += 1
                progress = True
    return pos


def execute(schedule: Schedule, cost) -> tuple[dict[int, list[Span]], dict[int, int]]:
    """Run ``schedule`` with ``cost(rank, action)`` seconds per compute or STEP and rendezvous
    messages: a send and its receive both complete when the later of the two arrives. A
    message to oneself (one rank holding neighbouring chunks) is a hand-off whose receive must
    follow its send. Returns the spans and, for each rank that cannot go on (deadlock), the
    action it blocks at."""
    p = len(schedule)
    clock = dict.fromkeys(schedule, 0)
    spans: dict[int, list[Span]] = {r: [] for r in schedule}

    def step(r: int, a: Action, pos: dict[int, int]) -> tuple[int, ...]:
        if not a.is_comm:
            spans[r].append(Span(a, clock[r], clock[r] + cost(r, a)))
            clock[r] = spans[r][-1].end
            return (r,)
        q, other = matching(r, a, p)
        j = pos[r] + 1 if q == r else pos.get(q, 0)  # to oneself: the receive is next
        if a.peer != q or j >= len(schedule.get(q, ())) or schedule[q][j] != other \
                or q == r and a.kind not in SENDS:
            return ()
        t = max(clock[r], clock[q])  # rendezvous: both wait for the later one
        spans[r].append(Span(a, clock[r], t))
        spans[q].append(Span(other, clock[q], t))
        clock[r] = clock[q] = t
        return r, q

    pos = replay(schedule, step)
    return spans, {r: pos[r] for r, acts in schedule.items() if pos[r] < len(acts)}


def execute_eager(schedule: Schedule, cost) -> dict[int, list[Span]]:
    """Time an already checked ``schedule`` as the runtime runs it, with non-blocking messages:
    a send goes the moment the compute that produced its message ends, and a receive is only
    posted where the list has it. The compute that needs the message waits for it. So messages
    take no time at their place in the list, and only computes wait (``cost(rank, action)``
    seconds each). Never slower than :func:`execute`'s rendezvous, and deadlock-free if that
    is. Each rank goes on, in rounds as in :func:`replay`, until it waits for a message."""
    spans: dict[int, list[Span]] = {r: [] for r in schedule}
    _eager(schedule, cost, spans)
    return spans


def makespan_eager(schedule: Schedule, cost) -> float:
    """:func:`execute_eager`'s makespan, without its spans: a planner times one schedule for
    each of hundreds of layouts, and the spans were most of the time. Messages take no time
    at their place in the list, so a schedule's compute orders alone (``schedules.
    compute_orders``) have its makespan. Raises ScheduleError where a compute's input never
    comes."""
    return max(_eager(schedule, cost, None).values(), default=0.0)


def _eager(schedule: Schedule, cost, spans: dict | None) -> dict[int, float]:
    """:func:`execute_eager`'s run: each rank's clock at its end, and where ``spans`` is
    given, each action's span appended to its rank's list."""
    rows, outputs = inputs(schedule)
    ended: list[float | None] = [None] * outputs  # when each F or B ended
    clock, pos = dict.fromkeys(rows, 0), dict.fromkeys(rows, 0)
    progress = True
    while progress:
        progress = False
        for r, row in rows.items():
            i, t, out = pos[r], clock[r], None if spans is None else spans[r]
            while i < len(row):
                a, needs, own, timed = row[i]
                start = t
                if needs >= 0:
                    end = ended[needs]
                    if end is None:
                        break
                    if end > start:
                        start = end
                if timed:
                    t = start + cost(r, a)
                if own >= 0:
                    ended[own] = t
                if out is not None:
                    out.append(Span(a, start, t))
                i += 1
            progress = progress or i > pos[r]
            pos[r], clock[r] = i, t
    stuck = {r: row[pos[r]][0] for r, row in rows.items() if pos[r] < len(row)}
    if stuck:
        raise ScheduleError("the computes cannot all run; each waits for an input never "
                            "computed: " + ", ".join(f"rank {r} at {a}" for r, a in stuck.items()))
    return clock


@by_contents
def inputs(schedule: Schedule) -> tuple[dict[int, list[tuple]], int]:
    """Each rank's actions, each as (action, the output it waits for, its own output, whether
    it takes time), outputs numbered from 0 (−1: none), and how many outputs there are. An F
    or a B of virtual stage k outputs (kind, micro-batch, k); it takes the output of the
    stage above (F: k − 1) or below (B: k + 1) where there is one, as ``lower.receive_for``
    has it. Kept by the schedule's contents: a planner times one schedule for many layouts."""
    p = len(schedule)
    last = p * chunks(schedule) - 1
    number: dict[tuple[str, int, int], int] = {}
    rows = {}
    for r, acts in schedule.items():
        rows[r] = []
        for a in acts:
            needs = own = -1
            if a.kind in ("F", "B"):
                k = virtual_stage(r, a.chunk, p)
                source = k - 1 if a.kind == "F" else k + 1
                if 0 <= source <= last:
                    needs = number.setdefault((a.kind, a.mb, source), len(number))
                own = number.setdefault((a.kind, a.mb, k), len(number))
            rows[r].append((a, needs, own, not a.is_comm))
    return rows, len(number)


def check(schedule: Schedule) -> None:
    """Raise ScheduleError listing every fault of ``schedule``, or return None."""
    problems = faults(schedule)
    if problems:
        raise ScheduleError("invalid schedule:\n  - " + "\n  - ".join(problems))


@by_contents
def faults(schedule: Schedule) -> tuple[str, ...]:
    """Every fault of ``schedule`` (``checks.py``), kept by its contents: a planner checks
    one schedule for each layout that runs it."""
    problems = malformed(schedule)
    if problems:
        return tuple(problems)
    p, v = len(schedule), chunks(schedule)
    problems += messages(schedule, p, v) + counts(schedule, p, v)
    for r, acts in schedule.items():
        problems += order(r, acts, p, v)
    _, blocked = execute(schedule, lambda r, a: 0)
    if blocked:
        problems.append("deadlock with rendezvous sends: " + ", ".join(
            f"rank {r} blocks at {schedule[r][i]} (action {i})" for r, i in blocked.items()))
    return tuple(problems)


def simulate(schedule: Schedule, forward: float = 1.0, backward: float = 2.0,
             weight: float = 0, step: float = 0) -> Timeline:
    """Time ``schedule`` (checked first). ``forward``/``backward`` cost one micro-batch through a
    rank's whole share of the model, so a chunk costs a v-th of it. With W actions, B costs
    ``backward − weight`` and W ``weight``. Messages are free: they are timed as the runtime
    sends them (:func:`execute_eager`), while :func:`check` holds the schedule to rendezvous
    sends. A STEP costs ``step``."""
    if min(forward, backward, weight, step) < 0 or weight > backward:
        raise ScheduleError(f"costs must be non-negative with weight ≤ backward, got forward="
                            f"{forward}, backward={backward}, weight={weight}, step={step}")
    check(schedule)
    p, m, v = len(schedule), micro_batches(schedule), chunks(schedule)
    split = splits_backward(schedule)
    costs = {"F": forward / v, "B": (backward - weight if split else backward) / v,
             "W": weight / v, "STEP": step}
    spans = execute_eager(schedule, lambda r, a: costs[a.kind])
    makespan = max((s.end for row in spans.values() for s in row), default=0)
    busy = {r: sum(s.end - s.start for s in row if not s.action.is_comm)
            for r, row in spans.items()}
    bubble = 1 - sum(busy.values()) / (p * makespan) if makespan else 0
    return Timeline(spans, makespan, busy, bubble, peak_stash(schedule), p, m, v)


def peak_stash(schedule: Schedule) -> dict[int, int]:
    """Per rank, the most (micro-batch, chunk) activations held at once: from F until B, or
    until W where the weight gradient is split off, since W reads them."""
    release = "W" if splits_backward(schedule) else "B"
    peaks = {}
    for r, acts in schedule.items():
        held = peak = 0
        for a in acts:
            held += (a.kind == "F") - (a.kind == release)
            peak = max(peak, held)
        peaks[r] = peak
    return peaks


def bubble_formula(p: int, m: int, v: int = 1) -> float:
    """The idle fraction of a flushed pipeline with uniform stages. v = 1 (GPipe, Huang et al.
    2019, §2.3; 1F1B alike): p − 1 idle slots beside m busy ones, (p−1)/(m+p−1), i.e. a
    utilization of m/(m+p−1). v > 1 (interleaved, Narayanan et al. 2021, §2.2): the bubble time
    shrinks to (p−1)/v of a micro-batch's time against m busy ones, (p−1)/(v·m + p − 1)."""
    return (p - 1) / (v * m + p - 1)
