"""A pure simulator of schedules: check one for every fault (rendezvous messages), or time it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

from .actions import (
    SENDS,
    Action,
    Schedule,
    ScheduleError,
    chunks,
    matching,
    splits_backward,
    virtual_stage,
)
from .lower import local_need, producer, receive_for, send_for


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


def micro_batches(schedule: Schedule) -> int:
    """``m``: one more than the largest micro-batch any compute names."""
    return 1 + max((a.mb for acts in schedule.values() for a in acts if a.is_compute),
                   default=-1)


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
    is."""
    p, v = len(schedule), chunks(schedule)
    clock = dict.fromkeys(schedule, 0)
    sent: dict[tuple[int, Action], float] = {}  # (receiving rank, its receive) → send time
    spans: dict[int, list[Span]] = {r: [] for r in schedule}

    def step(r: int, a: Action, pos: dict[int, int]) -> tuple[int, ...]:
        start = clock[r]
        if not a.is_comm:
            needed = receive_for(r, a, p, v) if a.kind in ("F", "B") else None
            if needed is not None and (r, needed) not in sent:
                return ()
            if needed is not None:
                start = max(start, sent.pop((r, needed)))
            clock[r] = start + cost(r, a)
            out = send_for(r, a, p, v)
            if out is not None:
                q, recv = matching(r, out, p)
                sent[q, recv] = clock[r]
        spans[r].append(Span(a, start, clock[r]))
        return (r,)

    replay(schedule, step)
    return spans


def check(schedule: Schedule) -> None:
    """Raise ScheduleError listing every fault of ``schedule``, or return None."""
    problems = malformed(schedule)
    if problems:
        raise ScheduleError("invalid schedule:\n  - " + "\n  - ".join(problems))
    p, v = len(schedule), chunks(schedule)
    problems += messages(schedule, p, v) + counts(schedule, p, v)
    for r, acts in schedule.items():
        problems += order(r, acts, p, v)
    _, blocked = execute(schedule, lambda r, a: 0)
    if blocked:
        problems.append("deadlock with rendezvous sends: " + ", ".join(
            f"rank {r} blocks at {schedule[r][i]} (action {i})" for r, i in blocked.items()))
    if problems:
        raise ScheduleError("invalid schedule:\n  - " + "\n  - ".join(problems))


def malformed(schedule: Schedule) -> list[str]:
    """Ranks 0..p−1, each with a list of Actions whose fields make sense."""
    if not isinstance(schedule, dict) or set(schedule) != set(range(len(schedule))):
        return [f"a schedule maps ranks 0..p−1 to lists of actions, got {schedule!r:.200}"]
    problems = []
    for r, acts in schedule.items():
        if not isinstance(acts, list):
            problems.append(f"rank {r}: {acts!r:.80} is not a list of actions")
            continue
        for i, a in enumerate(acts):
            if not isinstance(a, Action):
                problems.append(f"rank {r}: action {i} is {a!r:.80}, not an Action")
            elif not (isinstance(a.mb, int) and a.mb >= 0 or a.mb is None and a.kind == "STEP"):
                problems.append(f"rank {r}: {a!r} needs a micro-batch ≥ 0")
            elif not (isinstance(a.chunk, int) and a.chunk >= 0):
                problems.append(f"rank {r}: {a!r} needs a chunk ≥ 0")
            elif a.is_comm != isinstance(a.peer, int):
                problems.append(f"rank {r}: {a!r}: " + ("a message names its peer rank" if
                                a.is_comm else "only a message names a peer"))
    return problems


def messages(schedule: Schedule, p: int, v: int) -> list[str]:
    """Each message must go between neighbouring virtual stages, to the rank that holds the
    neighbour, and each send must meet exactly one receive."""
    problems, seen = [], Counter()
    for r, acts in schedule.items():
        for i, a in enumerate(acts):
            if not a.is_comm:
                continue
            k = virtual_stage(r, a.chunk, p)
            step = 1 if a.kind in ("SEND_ACT", "RECV_GRAD") else -1
            if not 0 <= k + step < p * v:
                problems.append(f"rank {r}: {a} (action {i}) has no virtual stage {k + step} "
                                f"to talk to (there are {p * v})")
            elif a.peer != matching(r, a, p)[0]:
                problems.append(f"rank {r}: {a} (action {i}) names rank {a.peer}, but virtual "
                                f"stage {k + step} is on rank {matching(r, a, p)[0]}")
            else:
                seen[r, a] += 1
    for (r, a), n in seen.items():
        q, other = matching(r, a, p)
        if seen[q, other] == 0:
            problems.append(f"rank {r}: {a} has no matching {other} on rank {q}")
        elif n > 1:
            problems.append(f"rank {r}: {a} appears {n} times")
    return problems


def counts(schedule: Schedule, p: int, v: int) -> list[str]:
    """Every (micro-batch, virtual stage) is forwarded and backwarded exactly once, and weight-
    gradiented once if the schedule splits W off."""
    seen = Counter((a.kind, a.mb, virtual_stage(r, a.chunk, p))
                   for r, acts in schedule.items() for a in acts if a.is_compute)
    kinds = ("F", "B", "W") if any(kind == "W" for kind, _, _ in seen) else ("F", "B")
    m, problems = micro_batches(schedule), []
    for kind in kinds:
        for mb in range(m):
            for k in range(p * v):
                n = seen[kind, mb, k]
                if n != 1:
                    problems.append(f"{kind}{mb} at virtual stage {k} (rank {k % p}, chunk "
                                    f"{k // p}) " + (f"runs {n} times" if n else "never runs"))
    return problems


def order(r: int, acts: list[Action], p: int, v: int) -> list[str]:
    """On rank ``r``: a compute after its own earlier compute (B after F, W after B) and after
    its input's receive; a send after the compute it carries; every output sent; STEP i after
    B i."""
    problems, seen = [], set()
    for i, a in enumerate(acts):
        need = local_need(a) if a.is_compute else None
        recv = receive_for(r, a, p, v) if a.is_compute else None
        if need and need not in seen:
            problems.append(f"rank {r}: {a} (action {i}) comes before its {need}")
        if recv and recv not in seen:
            problems.append(f"rank {r}: {a} (action {i}) runs on an input never received: "
                            f"no {recv} before it")
        if a.kind in SENDS and producer(a) not in seen:
            problems.append(f"rank {r}: {a} (action {i}) comes before {producer(a)}, "
                            f"which computes what it sends")
        if a.kind == "STEP" and a.mb is not None and Action("B", a.mb) not in seen:
            problems.append(f"rank {r}: {a} (action {i}) comes before B{a.mb}")
        seen.add(a)
    for a in acts:
        send = send_for(r, a, p, v) if a.is_compute else None
        if send and send not in seen:
            problems.append(f"rank {r}: the output of {a} is never sent (no {send})")
    return problems


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
    return Timeline(spans, makespan, busy, bubble, peak_stash(schedule, "W" if split else "B"),
                    p, m, v)


def peak_stash(schedule: Schedule, release: str) -> dict[int, int]:
    """Per rank, the most (micro-batch, chunk) activations held at once: from F until the
    ``release`` action (B, or W when the weight gradient is split off, since W reads them)."""
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
