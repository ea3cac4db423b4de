"""Each schedule's compute order per rank: the forwards, backwards, weight gradients and
updates each rank runs, in order, before ``lower`` adds the messages between them. A makespan
timed as the runtime sends (``simulator.makespan_eager``) and a peak stash depend on these
alone, so a planner weighing thousands of layouts reads them and never lowers."""

from __future__ import annotations

import heapq
import math
from collections import deque
from fractions import Fraction

from .actions import Action, ScheduleError

Orders = dict[int, list[Action]]  # rank → its F, B, W and STEP actions in order

STEP = Action("STEP")


def F(mb: int, chunk: int = 0) -> Action:
    return Action("F", mb, chunk)


def B(mb: int, chunk: int = 0) -> Action:
    return Action("B", mb, chunk)


def W(mb: int, chunk: int = 0) -> Action:
    return Action("W", mb, chunk)


def naive(p: int, m: int = 1) -> Orders:
    """Model distribution, one micro-batch: forward down the ranks, backward up, and each rank
    steps as soon as its own backward is done."""
    return {s: [F(0), B(0), STEP] for s in range(p)}


def gpipe(p: int, m: int) -> Orders:
    """GPipe (Huang et al. 2019, Fig. 2c): every forward, then every backward in reverse
    micro-batch order, then one synchronous update after the flush."""
    order = [F(i) for i in range(m)] + [B(i) for i in reversed(range(m))] + [STEP]
    return {s: list(order) for s in range(p)}


def one_f_one_b_order(p: int, m: int, s: int) -> list[Action]:
    """Rank ``s``'s compute order in PipeDream's 1F1B (Narayanan et al. 2021, §2.1, Fig. 4):
    p − s − 1 warm-up forwards, then one forward and one backward in turn, then the cool-down
    backwards. At most p − s micro-batches are in flight on rank s."""
    warm = min(p - s - 1, m)
    order = [F(i) for i in range(warm)]
    for i in range(m - warm):
        order += [F(warm + i), B(i)]
    return order + [B(i) for i in range(m - warm, m)]


def one_f_one_b(p: int, m: int) -> Orders:
    """PipeDream-Flush (Narayanan et al. 2021, §2.1): 1F1B, one update after the flush."""
    return {s: one_f_one_b_order(p, m, s) + [STEP] for s in range(p)}


def pipedream(p: int, m: int) -> Orders:
    """PipeDream (Narayanan et al. 2019, §3.3): 1F1B with no flush, each rank updating right
    after each micro-batch's backward. Weight stashing keeps a forward's version for its
    backward, which is the runtime's job."""
    orders = {}
    for s in range(p):
        orders[s] = []
        for a in one_f_one_b_order(p, m, s):
            orders[s] += [a, Action("STEP", a.mb)] if a.kind == "B" else [a]
    return orders


def rounds(p: int, m: int) -> list[int]:
    """Interleaving's rounds of micro-batches: as many as m holds groups of p, max(1, ⌊m/p⌋),
    their sizes as even as can be and the larger first (each at least p when m ≥ p). PyTorch's
    ``ScheduleInterleaved1F1B`` takes the same number of rounds but refuses m that they do not
    divide; a round larger by one is the only change here."""
    n = max(1, m // p)
    return [m // n + (i < m % n) for i in range(n)]


def interleaved(p: int, m: int, v: int) -> Orders:
    """Megatron's interleaved 1F1B (Narayanan et al. 2021, §2.2): v chunks per rank, chunk c of
    rank r is virtual stage c·p + r. Micro-batches go in rounds (:func:`rounds`; p each when p
    divides m), each round through chunk 0, then chunk 1, …, and backwards through the chunks
    in reverse. Rank r warms up with 2(p − r − 1) + (v − 1)·g forwards, g the first round's size
    (Megatron-LM, schedules.py), then alternates; since no later round is larger, every
    backward's forwards are done by then. Timed as the runtime sends, the bubble is then
    exactly (p − 1)/(v·m + p − 1) for any m ≥ p; with m < p a round returns to chunk 0 before
    the last rank is done with it."""
    sizes = rounds(p, m)
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    forwards = [F(start + j, c) for start, g in zip(starts, sizes)
                for c in range(v) for j in range(g)]
    backwards = [B(start + j, c) for start, g in zip(starts, sizes)
                 for c in reversed(range(v)) for j in range(g)]
    total = m * v
    orders = {}
    for r in range(p):
        warm = min(2 * (p - r - 1) + (v - 1) * sizes[0], total)
        order = forwards[:warm]
        for k in range(total - warm):
            order += [forwards[warm + k], backwards[k]]
        orders[r] = order + backwards[total - warm:] + [STEP]
    return orders


def list_schedule(p: int, cost: dict[str, float], pick) -> Orders:
    """Compute orders by list scheduling in time, messages free: whenever rank s is idle at
    time t it starts ``pick(s, finished)``, given ``finished(kind, mb, rank)``, whether that
    compute has ended by t. None leaves it idle; what it picks starts, so ``pick`` may keep
    count. Time goes from one compute's end to the next. Give exact costs (Fractions): two
    sums of the same costs in another order are then equal and tie, where floats' rounding
    would break the tie either way, and the order would change with the costs' scale. They
    are counted here in whole ticks of their common denominator, which order alike."""
    tick = math.lcm(*(Fraction(c).denominator for c in cost.values()))
    cost = {kind: int(Fraction(c) * tick) for kind, c in cost.items()}
    end: dict[tuple[str, int, int], int] = {}  # (kind, micro-batch, rank) → finish tick
    orders: dict[int, list[Action]] = {s: [] for s in range(p)}
    free, t = [0] * p, 0
    later: list[int] = []  # a heap of the finish ticks after t

    def finished(kind: str, i: int, rank: int) -> bool:
        ended = end.get((kind, i, rank))
        return ended is not None and ended <= t

    while True:
        for s in range(p):
            a = pick(s, finished) if free[s] <= t else None
            if a:
                orders[s].append(a)
                free[s] = end[a.kind, a.mb, s] = t + cost[a.kind]
                heapq.heappush(later, free[s])
        while later and later[0] <= t:
            heapq.heappop(later)
        if not later:
            return orders
        t = later[0]


def has_input(s: int, p: int, a: Action, finished) -> bool:
    """Whether compute ``a`` of rank ``s`` (v = 1) could start: an F once the rank above has
    forwarded it, a B once its own F and the rank below's B are done."""
    if a.kind == "F":
        return s == 0 or finished("F", a.mb, s - 1)
    return finished("F", a.mb, s) and (s == p - 1 or finished("B", a.mb, s + 1))


def bprio(p: int, m: int, forward: float = 1.0, backward: float = 2.0) -> Orders:
    """Backward-prioritized list scheduling, timed with these costs: a rank that falls idle
    runs its lowest ready backward if it has one, else its next forward if ready. Unlike 1F1B
    nothing caps the forwards in flight, so a rank may hold up to m micro-batches."""
    if not (forward > 0 and backward > 0):
        raise ScheduleError(f"bprio needs positive costs, got forward={forward}, "
                            f"backward={backward}")
    forward, backward = Fraction(forward), Fraction(backward)  # exact, as list_schedule says

    forwarded = [0] * p  # per rank: forwards started, in micro-batch order
    held: list[deque[int]] = [deque() for _ in range(p)]  # per rank: forwarded, no B; ascending

    def pick(s: int, finished) -> Action | None:
        # The lowest held B is the only one to ask: each rank runs its backwards in ascending
        # order (the last rank's B(i) waits on its own F(i) alone, and F(j < i) ended first;
        # a rank above waits on the rank below's B(i) too, which ran after its B(j < i)), so
        # a held B(i) is ready only once every lower held one is.
        if held[s] and has_input(s, p, B(held[s][0]), finished):
            return B(held[s].popleft())
        if forwarded[s] < m and has_input(s, p, F(forwarded[s]), finished):
            held[s].append(forwarded[s])
            forwarded[s] += 1
            return F(forwarded[s] - 1)
        return None

    orders = list_schedule(p, {"F": forward, "B": backward}, pick)
    return {s: orders[s] + [STEP] for s in range(p)}


def zb_h1(p: int, m: int, forward: float = 1.0, backward: float = 2.0,
          weight: float = 1.0) -> Orders:
    """Zero-bubble ZB-H1 (Qi et al. 2023, §3.1): B is the input gradient alone and W, the weight
    gradient, waits. Forwards and B keep 1F1B's order. A rank with nothing else ready runs its
    oldest pending W, filling what would be a bubble, and must run one once p micro-batches are
    held (1F1B's peak on rank 0). Bubble about (p − 1)(T_F + T_B − T_W), T_B = backward − weight."""
    if not (forward > 0 and 0 < weight < backward):
        raise ScheduleError(f"zb_h1 needs forward > 0 and 0 < weight < backward, got forward="
                            f"{forward}, backward={backward}, weight={weight}")
    forward, backward, weight = map(Fraction, (forward, backward, weight))  # exact, as above

    plans = [one_f_one_b_order(p, m, s) for s in range(p)]  # the F and B of each rank
    done = [0] * p  # per rank: how far along its plan
    held = [0] * p  # per rank: forwards whose W has not run
    unweighed: list[deque[int]] = [deque() for _ in range(p)]  # B run, W not, oldest first

    def pick(s: int, finished) -> Action | None:
        nxt = plans[s][done[s]] if done[s] < len(plans[s]) else None
        if nxt and has_input(s, p, nxt, finished) and (nxt.kind == "B" or held[s] < p):
            done[s] += 1
            held[s] += nxt.kind == "F"
            if nxt.kind == "B":
                unweighed[s].append(nxt.mb)
            return nxt
        if not unweighed[s]:
            return None
        held[s] -= 1
        return W(unweighed[s].popleft())

    cost = {"F": forward, "B": backward - weight, "W": weight}
    orders = list_schedule(p, cost, pick)
    return {s: orders[s] + [STEP] for s in range(p)}


ORDERS = {"naive": naive, "gpipe": gpipe, "1f1b": one_f_one_b, "interleaved": interleaved,
          "bprio": bprio, "pipedream": pipedream, "zb-h1": zb_h1}
