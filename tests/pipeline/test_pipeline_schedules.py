"""Every named schedule lowers to one that the simulator accepts, with its STEPs in place."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.parallel.pipeline import schedules
from scratchpar.parallel.pipeline.actions import Action, ScheduleError, virtual_stage
from scratchpar.parallel.pipeline.lower import lower
from scratchpar.parallel.pipeline.orders import rounds
from scratchpar.parallel.pipeline.schedules import (
    SCHEDULES,
    build,
    gpipe,
    interleaved,
    one_f_one_b,
    unmet,
    zb_h1,
)
from scratchpar.parallel.pipeline.simulator import check


@st.composite
def configs(draw, name):
    """(p, m, v) that ``name`` accepts: p ≤ 8, m ≤ 32, v ∈ {2, 3, 4} when interleaved."""
    v = draw(st.sampled_from([2, 3, 4])) if name == "interleaved" else 1
    return draw(st.integers(1, 8)), 1 if name == "naive" else draw(st.integers(1, 32)), v


def computes(schedule, p):
    return Counter((a.kind, a.mb, virtual_stage(r, a.chunk, p))
                   for r, acts in schedule.items() for a in acts if a.is_compute)


@pytest.mark.parametrize("name", sorted(SCHEDULES))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_schedule_checks_out_and_runs_each_microbatch_once(name, data):
    p, m, v = data.draw(configs(name))
    assert unmet(name, p, m, v) == []
    schedule = build(name, p, m, v)
    check(schedule)
    kinds = ("F", "B", "W") if name == "zb-h1" else ("F", "B")
    assert computes(schedule, p) == Counter(
        {(kind, mb, k): 1 for kind in kinds for mb in range(m) for k in range(p * v)})
    for acts in schedule.values():
        steps = [i for i, a in enumerate(acts) if a.kind == "STEP"]
        if name == "pipedream":  # one update right after each micro-batch's backward
            backwards = [a.mb for a in acts if a.kind == "B"]
            assert [acts[i].mb for i in steps] == backwards
            assert all(Action("B", acts[i].mb) in acts[:i] for i in steps)
        else:  # one update after the flush, as the rank's last action
            assert steps == [len(acts) - 1] and acts[-1] == Action("STEP")


def test_gpipe_and_1f1b_orders():
    assert {r: [str(a) for a in acts] for r, acts in gpipe(2, 2).items()} == {
        0: ["F0", "SEND_ACT 0→1", "F1", "SEND_ACT 1→1", "RECV_GRAD 1←1", "B1",
            "RECV_GRAD 0←1", "B0", "STEP"],
        1: ["RECV_ACT 0←0", "F0", "RECV_ACT 1←0", "F1", "B1", "SEND_GRAD 1→0", "B0",
            "SEND_GRAD 0→0", "STEP"]}
    warm = [[a.mb for a in acts[:acts.index(next(b for b in acts if b.kind == "B"))]
             if a.kind == "F"] for acts in one_f_one_b(4, 8).values()]
    assert warm == [[0, 1, 2, 3], [0, 1, 2], [0, 1], [0]]  # p − s − 1 warm-up, then 1F1B


def test_interleaved_runs_chunks_in_rounds_of_p_or_more_the_larger_first():
    forwards = [str(a) for a in interleaved(2, 4, 2)[0] if a.kind == "F"]
    assert forwards == ["F0", "F1", "F0.1", "F1.1", "F2", "F3", "F2.1", "F3.1"]
    forwards = [str(a) for a in interleaved(2, 5, 2)[0] if a.kind == "F"]
    assert forwards == ["F0", "F1", "F2", "F0.1", "F1.1", "F2.1", "F3", "F4", "F3.1", "F4.1"]
    assert rounds(4, 11) == [6, 5] and rounds(4, 3) == [3] and rounds(8, 32) == [8] * 4
    alone = [str(a) for a in interleaved(1, 1, 2)[0]]  # one rank hands chunk 0's output to 1
    assert alone == ["F0", "SEND_ACT 0→0", "RECV_ACT 0.1←0", "F0.1", "B0.1", "SEND_GRAD 0.1→0",
                     "RECV_GRAD 0←0", "B0", "STEP"]


@pytest.mark.parametrize("name, p, m, v, reasons", [
    ("gpipe", 0, 4, 1, ["p, the stages, must be at least 1 (got 0)"]),
    ("1f1b", 2, 0, 1, ["m, the micro-batches, must be at least 1 (got 0)"]),
    ("naive", 2, 4, 1, ["naive runs one micro-batch: m must be 1"]),
    ("interleaved", 4, 6, 1, ["interleaved needs v = 2 or more"]),
    ("1f1b", 4, 8, 2, ["v = 2 applies only to interleaved"]),
    ("pipedream", -1, -1, 3, ["p, the stages, must be", "m, the micro-batches, must be",
                              "v = 3"]),
    ("zigzag", 4, 8, 1, ["'zigzag' is not a schedule; choose one of naive"]),
])
def test_every_unmet_requirement_is_named(name, p, m, v, reasons):
    why = unmet(name, p, m, v)
    assert len(why) == len(reasons)
    for reason, said in zip(reasons, why):
        assert reason in str(said)
    with pytest.raises(ScheduleError) as e:
        build(name, p, m, v)
    assert all(reason in str(e.value) for reason in reasons)


def test_schedule_functions_refuse_what_requirements_refuse():
    with pytest.raises(ScheduleError, match="v = 2 or more"):
        interleaved(3, 4, 1)
    with pytest.raises(ScheduleError, match="0 < weight < backward"):
        zb_h1(2, 2, weight=2.0)
    with pytest.raises(ScheduleError, match="^zb-h1: m, the micro-batches"):  # its own name
        zb_h1(2, 0)


def test_lower_names_each_rank_stuck_in_an_infeasible_order():
    F, B = (lambda i: Action("F", i)), (lambda i: Action("B", i))
    with pytest.raises(ScheduleError) as e:
        lower({0: [F(0), B(0), F(1), B(1)], 1: [F(1), B(1), F(0), B(0)]}, 2)
    assert str(e.value) == (
        "the compute orders cannot run: rank 0 is stuck at B0 (compute 1 of its order), "
        "waiting for B0 on rank 1; rank 1 is stuck at F1 (compute 0 of its order), waiting "
        "for F1 on rank 0")
    with pytest.raises(ScheduleError, match="waiting for its own F0"):
        lower({0: [B(0), F(0)]}, 1)


def test_lower_takes_computes_only_and_every_rank():
    with pytest.raises(ScheduleError, match="lower\\(\\) adds messages: rank 0: SEND_ACT 0→1"):
        lower({0: [Action("F", 0), Action("SEND_ACT", 0, 0, 1)], 1: [Action("F", 0)]}, 2)
    with pytest.raises(ScheduleError, match="ranks 0..2, got \\[0, 1\\]"):
        lower({0: [], 1: []}, 3)


@pytest.mark.parametrize("name, costs", [("bprio", (1.0, 3.0)), ("zb-h1", (1.0, 1.5, 0.5))])
def test_bprio_and_zb_h1_are_built_with_the_costs_given(name, costs):
    """The costs reach the schedule, and these ones change its order from 1:2:1's."""
    built = schedules.build(name, 4, 8, 1, (*costs, 0.5)[:3])
    assert built == schedules.SCHEDULES[name](4, 8, *costs)
    assert built != schedules.build(name, 4, 8)
    assert schedules.build("1f1b", 4, 8, 1, (1.0, 3.0, 0.5)) == schedules.build("1f1b", 4, 8)
