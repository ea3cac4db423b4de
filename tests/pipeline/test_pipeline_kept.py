"""Built schedules and what the simulator finds are kept, yet every caller gets its own copy and
an edited schedule is checked anew; bprio and zb-h1 are ordered by their costs' ratios alone."""

from fractions import Fraction

import pytest

from scratchpar.parallel.pipeline.actions import Action, ScheduleError
from scratchpar.parallel.pipeline.schedules import bprio, build, zb_h1
from scratchpar.parallel.pipeline.simulator import check, execute_eager


def test_each_build_is_the_callers_own_to_edit():
    first, second = build("1f1b", 3, 6), build("1f1b", 3, 6)
    assert first == second and first is not second and first[0] is not second[0]
    first[0].pop()
    assert build("1f1b", 3, 6) == second


def test_an_edited_schedule_is_checked_anew():
    schedule = build("gpipe", 2, 2)
    check(schedule)
    schedule[1].remove(Action("B", 0))
    with pytest.raises(ScheduleError, match="B0 at virtual stage 1 .* never runs"):
        check(schedule)
    check(build("gpipe", 2, 2))


def test_timing_a_kept_schedule_again_follows_the_new_costs():
    schedule = build("zb-h1", 4, 8)
    slow = execute_eager(schedule, lambda r, a: 2.0 if a.is_compute else 0.0)
    fast = execute_eager(build("zb-h1", 4, 8), lambda r, a: 1.0 if a.is_compute else 0.0)
    assert max(s.end for row in slow.values() for s in row) == 2 * max(
        s.end for row in fast.values() for s in row)


@pytest.mark.parametrize("schedule, costs", [
    (bprio, (0.7, 2.3)), (zb_h1, (0.7, 2.3, 0.9)), (zb_h1, (1.0, 1.5, 1.2))])
def test_list_scheduled_orders_follow_the_costs_ratios_alone(schedule, costs):
    """Timed exactly, sums of the same costs in another order tie whatever their scale."""
    built = schedule(5, 16, *costs)
    for scale in (3.0, 1e-3, 0.1):
        assert schedule(5, 16, *(c * scale for c in costs)) == built
    assert schedule(5, 16, *map(Fraction, costs)) == built
