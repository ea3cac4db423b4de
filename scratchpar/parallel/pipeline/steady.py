"""1F1B's makespan and peak stash at many micro-batches, from three short runs of it.

Once every stage has filled, 1F1B repeats one forward and one backward per rank: each
micro-batch more adds its slowest stage's forward and backward to the makespan (Narayanan et
al. 2021, §2.2) and nothing to any rank's peak stash. The schedule is a max-plus linear system
whose timings, once its transient has passed, grow by its heaviest cycle's mean (Baccelli,
Cohen, Olsder & Quadrat 1992, *Synchronization and Linearity*, §3.7); 1F1B's cycles average
stages' work, so none outweighs the slowest stage's own. A planner weighing a run of 1,024
micro-batches over 128 stages then times runs of 2p to 2p + 2, shared by every layout of that
depth, where it would time one of m for each. It reads the compute orders alone, never lowered
to messages, on which neither figure depends.

The transient has no closed-form bound: a slower path can set the pace for a while, at a
lesser rate. So the runs at m₀ = 2p, m₀ + 1 and m₀ + 2 must each step at exactly the rates
the steady state grows by, which no transient reaches; elsewhere, and for the other schedules
(GPipe's rate is its slowest forward plus its slowest backward, and a list scheduler's order
changes with m), the schedule of m is built and run whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import schedules

REPEATING = "1f1b"
RTOL = 1e-9  # a step equals its rate within this share of the figure


def at(figures: Callable[[dict], Sequence[float]], rates: Sequence[float], name: str, p: int,
       m: int, v: int = 1, costs: tuple[float, ...] = schedules.UNIT_COSTS) -> tuple:
    """``figures(orders)`` of ``schedules.compute_orders(name, p, m, v, costs)``, where each
    figure grows by its entry of ``rates`` per micro-batch in the steady state: extended from
    three runs of 2p to 2p + 2 micro-batches that step at those rates, else from the whole."""
    start = 2 * p
    if name != REPEATING or m <= start + 2:
        return tuple(figures(schedules.compute_orders(name, p, m, v, costs)))
    runs = [tuple(figures(schedules.compute_orders(name, p, start + k, v, costs)))
            for k in range(3)]
    steady = all(abs(b - a - rate) <= RTOL * max(abs(b), 1.0)
                 for rate, *figure in zip(rates, *runs)
                 for a, b in zip(figure, figure[1:]))
    if not steady:
        return tuple(figures(schedules.compute_orders(name, p, m, v, costs)))
    return tuple(a + (m - start) * rate for a, rate in zip(runs[0], rates))
