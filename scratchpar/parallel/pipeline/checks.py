"""The faults a schedule can have, each found and said in words: what ``simulator.check``
lists, beside a deadlock of rendezvous messages, which it finds by replaying the schedule."""

from __future__ import annotations

from collections import Counter

from .actions import SENDS, Action, Schedule, matching, micro_batches, place, virtual_stage
from .lower import local_need, producer, receive_for, send_for


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
            elif a.peer != place(k + step, p)[0]:
                problems.append(f"rank {r}: {a} (action {i}) names rank {a.peer}, but virtual "
                                f"stage {k + step} is on rank {place(k + step, p)[0]}")
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
