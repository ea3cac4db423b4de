"""Lowering: per-rank compute orders become a schedule whose rendezvous sends cannot deadlock."""

from __future__ import annotations

from .actions import (
    Action,
    Schedule,
    ScheduleError,
    chunks,
    matching,
    place,
    splits_backward,
    virtual_stage,
)


def receive_for(rank: int, action: Action, p: int, v: int) -> Action | None:
    """The receive that compute ``action`` of ``rank`` waits for: an F after virtual stage 0
    needs the activation from upstream, a B before the last stage the gradient from downstream."""
    k = virtual_stage(rank, action.chunk, p)
    if action.kind == "F" and k > 0:
        return Action("RECV_ACT", action.mb, action.chunk, place(k - 1, p)[0])
    if action.kind == "B" and k < p * v - 1:
        return Action("RECV_GRAD", action.mb, action.chunk, place(k + 1, p)[0])
    return None


def send_for(rank: int, action: Action, p: int, v: int) -> Action | None:
    """The send that carries the output of compute ``action`` of ``rank`` onward, if any."""
    k = virtual_stage(rank, action.chunk, p)
    if action.kind == "F" and k < p * v - 1:
        return Action("SEND_ACT", action.mb, action.chunk, place(k + 1, p)[0])
    if action.kind == "B" and k > 0:
        return Action("SEND_GRAD", action.mb, action.chunk, place(k - 1, p)[0])
    return None


def producer(send: Action) -> Action:
    """The compute whose output ``send`` carries."""
    return Action("F" if send.kind == "SEND_ACT" else "B", send.mb, send.chunk)


def local_need(action: Action) -> Action | None:
    """The compute of the same rank that ``action`` must follow: B its F, W its B."""
    before = {"B": "F", "W": "B"}.get(action.kind)
    return Action(before, action.mb, action.chunk) if before else None


def lower(orders: dict[int, list[Action]], p: int, forward: float = 1, backward: float = 2,
          weight: float = 0) -> Schedule:
    """Insert the sends and receives into ``orders`` (F/B/W/STEP per rank, in order).

    The orders run in time with these costs (as in ``simulate``; STEP is free), each rank
    starting its next compute as soon as it has its input. A message goes at the first instant
    when its producer has computed it and both ranks are between computes, so a rendezvous
    there costs neither of them anything. Pairs are appended in one global order, so replaying
    that order meets every rendezvous: the earliest unfinished action is always at the head of
    its rank (of both ranks, for a pair). Any positive costs give a deadlock-free schedule;
    the true ones place the messages where they wait least. With one rank (p = 1, v > 1) a
    message goes from a rank to itself: its receive directly follows its send.
    """
    if sorted(orders) != list(range(p)):
        raise ScheduleError(f"compute orders must name ranks 0..{p - 1}, got {sorted(orders)}")
    comm = [f"rank {r}: {a}" for r, acts in orders.items() for a in acts if a.is_comm]
    if comm:
        raise ScheduleError("compute orders hold only F, B, W and STEP; lower() adds messages: "
                            + ", ".join(comm))
    v = chunks(orders)
    split = splits_backward(orders)
    cost = {"F": forward / v, "B": (backward - weight if split else backward) / v,
            "W": weight / v, "STEP": 0}
    out: Schedule = {r: [] for r in range(p)}
    pos = dict.fromkeys(range(p), 0)
    free = dict.fromkeys(range(p), 0)  # when each rank's current compute ends
    running: dict[int, Action] = {}
    done: dict[int, set[Action]] = {r: set() for r in range(p)}
    got: dict[int, set[Action]] = {r: set() for r in range(p)}
    unsent: dict[int, list[Action]] = {r: [] for r in range(p)}  # outputs computed, not sent
    t = 0
    while any(pos[r] < len(orders[r]) for r in range(p)) or running:
        changed = True
        while changed:
            changed = False
            for r in [r for r in running if free[r] <= t]:
                a = running.pop(r)
                done[r].add(a)
                unsent[r] += [s for s in [send_for(r, a, p, v)] if s]
            for q in range(p):  # messages between two ranks that are both between computes
                for send in [s for s in unsent[q] if q not in running and s.peer not in running]:
                    c, recv = matching(q, send, p)
                    out[q].append(send)
                    out[c].append(recv)
                    got[c].add(recv)
                    unsent[q].remove(send)
                    changed = True
            for r in range(p):
                while r not in running and pos[r] < len(orders[r]) and ready(
                        r, orders[r][pos[r]], done[r], got[r], p, v):
                    a = orders[r][pos[r]]
                    out[r].append(a)
                    pos[r] += 1
                    running[r], free[r], changed = a, t + cost[a.kind], True
        if not running and any(pos[r] < len(orders[r]) for r in range(p)):
            raise ScheduleError("the compute orders cannot run: " + "; ".join(
                f"rank {r} is stuck at {orders[r][pos[r]]} (compute {pos[r]} of its order), "
                f"{why(r, orders[r][pos[r]], done[r], got[r], p, v)}"
                for r in range(p) if pos[r] < len(orders[r])))
        if running:
            t = min(free[r] for r in running)
    return out


def ready(r: int, a: Action, done: set[Action], got: set[Action], p: int, v: int) -> bool:
    """Whether ``a`` of rank ``r`` can start: a STEP always, a compute once it has its message
    and its own earlier compute."""
    if a.kind == "STEP":
        return True
    recv, need = receive_for(r, a, p, v), local_need(a)
    return (recv is None or recv in got) and (need is None or need in done)


def why(r: int, a: Action, done: set[Action], got: set[Action], p: int, v: int) -> str:
    """What stuck compute ``a`` of rank ``r`` waits for, in words."""
    need, recv = local_need(a), receive_for(r, a, p, v)
    if need and need not in done:
        return f"waiting for its own {need}"
    q, send = matching(r, recv, p)  # not ready, yet has its own compute: the message is missing
    return f"waiting for {producer(send)} on rank {q}"
