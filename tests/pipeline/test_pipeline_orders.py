"""A schedule's compute orders, before its messages, have its eager makespan and its peak
stash: what a planner reads of thousands of layouts without lowering them."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.parallel.pipeline import schedules
from scratchpar.parallel.pipeline.actions import Action, ScheduleError
from scratchpar.parallel.pipeline.simulator import makespan_eager, peak_stash


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(schedules.SCHEDULES)), p=st.integers(1, 6),
       m=st.integers(1, 14), seed=st.integers(0, 2**16))
def test_the_orders_time_and_stash_as_the_lowered_schedule(name, p, m, seed):
    m, v = (1 if name == "naive" else m), (2 if name == "interleaved" else 1)
    costs = (1.0, 3.0, 1.25) if seed % 2 else schedules.UNIT_COSTS
    rng = random.Random(seed)
    seconds = {(r, kind): rng.uniform(0.1, 4.0) for r in range(p) for kind in "FBW"}

    def cost(r, a):
        return 0.0 if a.is_comm or a.kind == "STEP" else seconds[r, a.kind] / (1 + a.chunk)

    orders = schedules.compute_orders(name, p, m, v, costs)
    lowered = schedules.build(name, p, m, v, costs)
    assert orders == {r: [a for a in acts if not a.is_comm] for r, acts in lowered.items()}
    assert makespan_eager(orders, cost) == makespan_eager(lowered, cost)
    assert peak_stash(orders) == peak_stash(lowered)


def test_orders_whose_input_never_comes_are_refused():
    stuck = {0: [Action("B", 0), Action("F", 0)], 1: [Action("F", 0), Action("B", 0)]}
    with pytest.raises(ScheduleError, match="rank 0 at B0, rank 1 at F0"):
        makespan_eager(stuck, lambda r, a: 1.0)


def test_the_orders_are_the_caller_s_to_edit():
    first = schedules.compute_orders("1f1b", 3, 6)
    first[0].clear()
    assert schedules.compute_orders("1f1b", 3, 6)[0]
