"""1F1B's makespan and peak stash at many micro-batches, extended from three short runs, equal
the whole schedule's over random stage costs; where the runs do not step at the steady
state's rates, or the schedule is another, the whole is built."""

import random

import pytest

from scratchpar.parallel.pipeline import schedules, steady
from scratchpar.parallel.pipeline.actions import micro_batches, splits_backward
from scratchpar.parallel.pipeline.simulator import makespan_eager, peak_stash


def figures_of(stages: list[tuple[float, float]], message: float, weight: float):
    """A schedule's makespan (its compute orders', or the lowered whole's) with each F and B of
    rank r costing ``stages[r]`` and a message, W the share ``weight`` of B, then each rank's
    peak stash."""

    def figures(schedule) -> tuple[float, ...]:
        split = weight if splits_backward(schedule) else 0.0

        def cost(r, action):
            forward, backward = stages[r]
            return {"F": forward + message, "B": (1 - split) * backward + message,
                    "W": split * backward}.get(action.kind, 0.0)

        return makespan_eager(schedule, cost), *peak_stash(schedule).values()

    return figures


@pytest.mark.parametrize("p", [2, 3, 5, 8, 16])
@pytest.mark.parametrize("spread", [1.5, 10.0])
def test_many_micro_batches_from_three_runs_equal_the_whole(p, spread):
    """Stage costs up to ``spread`` apart and messages up to 1: where a slower path sets the
    pace at 2p, the runs do not step at the slowest stage's rate and the whole is run."""
    rng = random.Random(p * 31 + int(spread))
    for _ in range(4):
        stages = [(rng.uniform(0.1, spread), rng.uniform(0.1, 2 * spread)) for _ in range(p)]
        message = rng.uniform(0.0, 1.0)
        figures = figures_of(stages, message, 0.0)
        rates = [max(f + b for f, b in stages) + 2 * message, *[0] * p]
        for m in (2 * p + 3, 3 * p + 1, 5 * p + 2):
            whole = figures(schedules.build("1f1b", p, m))
            got = steady.at(figures, rates, "1f1b", p, m)
            assert got[0] == pytest.approx(whole[0], rel=1e-12)
            assert got[1:] == whole[1:]  # the peaks, exactly


def test_runs_that_do_not_step_at_the_rates_fall_back_to_the_whole():
    seen = []

    def squared(schedule):  # m², never affine in m
        seen.append(micro_batches(schedule))
        return (micro_batches(schedule) ** 2,)

    assert steady.at(squared, [13], "1f1b", 3, 20) == (400,)  # steps 13, 15: not both 13
    assert seen == [6, 7, 8, 20]


def test_a_figure_at_its_rate_extends():
    seen = []

    def linear(schedule):
        seen.append(micro_batches(schedule))
        return (5 + 3 * micro_batches(schedule),)

    assert steady.at(linear, [3], "1f1b", 3, 1000) == (3005,)
    assert seen == [6, 7, 8]


@pytest.mark.parametrize("name, v", [("gpipe", 1), ("zb-h1", 1), ("interleaved", 2),
                                     ("bprio", 1)])
def test_other_schedules_are_built_whole(name, v):
    seen = []
    steady.at(lambda schedule: seen.append(micro_batches(schedule)) or (0,), [0], name, 2, 16,
              v)
    assert seen == [16]
