"""The simulator: exact bubbles and stashes of the classic schedules, and every fault named."""

import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar import nn
from scratchpar.optim import SGD
from scratchpar.parallel.pipeline import Pipeline
from scratchpar.parallel.pipeline.actions import Action, ScheduleError
from scratchpar.parallel.pipeline.schedules import (
    bprio,
    build,
    gpipe,
    interleaved,
    naive,
    one_f_one_b,
    zb_h1,
)
from scratchpar.parallel.pipeline.simulator import (
    bubble_formula,
    check,
    execute_eager,
    makespan_eager,
    simulate,
)
from scratchpar.train.task import Task

costs = st.integers(1, 6).map(Fraction)


def F(i):
    return Action("F", i)


def B(i):
    return Action("B", i)


def send_act(i, peer):
    return Action("SEND_ACT", i, 0, peer)


def recv_act(i, peer):
    return Action("RECV_ACT", i, 0, peer)


def send_grad(i, peer):
    return Action("SEND_GRAD", i, 0, peer)


def recv_grad(i, peer):
    return Action("RECV_GRAD", i, 0, peer)


STEP = Action("STEP")
GOOD = {0: [F(0), send_act(0, 1), recv_grad(0, 1), B(0), STEP],
        1: [recv_act(0, 0), F(0), B(0), send_grad(0, 0), STEP]}


@pytest.mark.parametrize("schedule", [gpipe, one_f_one_b])
@settings(max_examples=30, deadline=None)
@given(p=st.integers(1, 8), m=st.integers(1, 32), forward=costs, backward=costs)
def test_gpipe_and_1f1b_bubble_is_exactly_the_formula(schedule, p, m, forward, backward):
    timeline = simulate(schedule(p, m), forward, backward)
    assert timeline.bubble == Fraction(p - 1, m + p - 1)  # GPipe, Huang et al. 2019, §2.3
    assert timeline.bubble == pytest.approx(bubble_formula(p, m), rel=1e-12, abs=1e-15)
    assert timeline.makespan == (m + p - 1) * (forward + backward)
    assert (timeline.p, timeline.m, timeline.v) == (p, m, 1)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), forward=costs, backward=costs)
def test_interleaving_meets_its_formula_for_any_costs(data, forward, backward):
    """Whether or not p divides m: rounds of p or more micro-batches keep the chunks handing
    over in step."""
    p = data.draw(st.integers(1, 8))
    m, v = data.draw(st.integers(p, 32)), data.draw(st.sampled_from([2, 3, 4]))
    timeline = simulate(interleaved(p, m, v, forward, backward), forward, backward)
    assert timeline.bubble == Fraction(p - 1, v * m + p - 1)  # Narayanan et al. 2021, §2.2
    assert timeline.bubble <= simulate(one_f_one_b(p, m), forward, backward).bubble
    assert timeline.v == v


@settings(max_examples=20, deadline=None)
@given(data=st.data(), v=st.sampled_from([2, 4]))
def test_fewer_micro_batches_than_ranks_idle_no_more_than_1f1b(data, v):
    """With m < p a round comes back to chunk 0 before the last rank is done with it: the
    formula is out of reach, and the schedule still idles no more than 1F1B."""
    p = data.draw(st.integers(2, 8))
    m = data.draw(st.integers(1, p - 1))
    timeline = simulate(interleaved(p, m, v), Fraction(1), Fraction(2))
    assert Fraction(p - 1, v * m + p - 1) < timeline.bubble
    assert timeline.bubble <= simulate(one_f_one_b(p, m), Fraction(1), Fraction(2)).bubble


@settings(max_examples=30, deadline=None)
@given(p=st.integers(1, 8), m=st.integers(1, 32))
def test_1f1b_stashes_at_most_p_minus_s_and_gpipe_all_m(p, m):
    flush = simulate(one_f_one_b(p, m)).peak_stash
    assert all(flush[s] <= min(p - s, m) for s in range(p))
    assert simulate(gpipe(p, m)).peak_stash == dict.fromkeys(range(p), m)


def test_naive_idles_all_but_one_stage():
    timeline = simulate(naive(4), 1, 2, step=1)
    assert timeline.makespan == 4 * 3 + 1  # the STEPs overlap the upstream backwards
    assert timeline.busy == dict.fromkeys(range(4), 4)


def test_bprio_runs_ahead_of_1f1b_and_checks_out():
    ahead, flush = bprio(4, 8), one_f_one_b(4, 8)
    check(ahead)
    assert ahead != flush
    assert simulate(ahead).peak_stash[0] == 8 > simulate(flush).peak_stash[0] == 4


@settings(max_examples=20, deadline=None)
@given(p=st.integers(1, 8), data=st.data())
def test_zb_h1_bubble_is_a_third_of_1f1b_at_equal_passes(p, data):
    m = data.draw(st.integers(p, 32))
    timeline = simulate(zb_h1(p, m), forward=1, backward=2, weight=1)
    assert timeline.makespan == 3 * m + (p - 1)  # Qi et al. 2023, §3.1: (p−1)(T_F+T_B−T_W)
    assert max(timeline.peak_stash.values()) <= p


def test_spans_time_messages_as_the_runtime_sends_them():
    """Messages take no time where the list has them; the compute that needs one waits."""
    timeline = simulate(GOOD, 1, 2)
    assert [(str(s.action), s.start, s.end) for s in timeline.spans[0]] == [
        ("F0", 0, 1), ("SEND_ACT 0→1", 1, 1), ("RECV_GRAD 0←1", 1, 1), ("B0", 4, 6),
        ("STEP", 6, 6)]
    assert timeline.busy == {0: 3, 1: 3} and timeline.makespan == 6


def test_receives_placed_late_for_rendezvous_do_not_delay_the_runtime():
    """Interleaved in Megatron's order meets (p − 1)/(v·m + p − 1) (Narayanan et al. 2021,
    §2.2) once messages are timed as the runtime sends them, while the same list replayed
    with blocking rendezvous messages falls short."""
    from scratchpar.parallel.pipeline.simulator import execute

    forward, backward = Fraction(1), Fraction(3)
    schedule = interleaved(4, 4, 4, forward, backward)
    timeline = simulate(schedule, forward, backward)
    assert timeline.bubble == Fraction(3, 19)
    spans, _ = execute(schedule,
                       lambda r, a: {"F": forward / 4, "B": backward / 4}.get(a.kind, 0))
    assert max(s.end for row in spans.values() for s in row) > timeline.makespan


def test_bubble_formulas():
    assert bubble_formula(4, 8) == 3 / 11
    assert bubble_formula(4, 8, 2) == 3 / 19
    assert bubble_formula(1, 5) == 0


def broken(schedule, *messages):
    with pytest.raises(ScheduleError) as e:
        check(schedule)
    for message in messages:
        assert message in str(e.value)
    return str(e.value)


def test_check_accepts_a_good_schedule():
    check(GOOD)


def test_check_names_a_missing_receive():
    broken({0: GOOD[0], 1: GOOD[1][1:]},
           "rank 0: SEND_ACT 0→1 has no matching RECV_ACT 0←0 on rank 1",
           "rank 1: F0 (action 0) runs on an input never received: no RECV_ACT 0←0 before it",
           "deadlock with rendezvous sends: rank 0 blocks at SEND_ACT 0→1 (action 1)")


def test_check_names_a_send_to_the_wrong_peer():
    three = {0: [F(0), send_act(0, 2), recv_grad(0, 1), B(0)],
             1: [recv_act(0, 0), F(0), send_act(0, 2), recv_grad(0, 2), B(0), send_grad(0, 0)],
             2: [recv_act(0, 1), F(0), B(0), send_grad(0, 1)]}
    broken(three, "rank 0: SEND_ACT 0→2 (action 1) names rank 2, but virtual stage 1 is on "
                  "rank 1", "rank 0: the output of F0 is never sent (no SEND_ACT 0→1)")


def test_check_finds_the_rendezvous_deadlock_of_eager_sends():
    eager = {0: [F(0), send_act(0, 1), F(1), send_act(1, 1), recv_grad(0, 1), B(0),
                 recv_grad(1, 1), B(1), STEP],
             1: [recv_act(0, 0), F(0), B(0), send_grad(0, 0), recv_act(1, 0), F(1), B(1),
                 send_grad(1, 0), STEP]}
    assert broken(eager) == ("invalid schedule:\n  - deadlock with rendezvous sends: rank 0 "
                             "blocks at SEND_ACT 1→1 (action 3), rank 1 blocks at SEND_GRAD "
                             "0→0 (action 3)")


def test_check_wants_a_hand_off_to_oneself_received_right_after_its_send():
    alone = interleaved(1, 2, 2)
    check(alone)
    alone[0][1:3] = alone[0][2:0:-1]
    broken(alone, "deadlock with rendezvous sends: rank 0 blocks at RECV_ACT 0.1←0 (action 1)")


def test_check_names_order_and_count_faults():
    broken({0: [B(0), F(0)]}, "rank 0: B0 (action 0) comes before its F0")
    broken({0: [F(0), B(0), F(1)]}, "B1 at virtual stage 0 (rank 0, chunk 0) never runs")
    broken({0: [F(0), F(0), B(0)]}, "F0 at virtual stage 0 (rank 0, chunk 0) runs 2 times")
    broken({0: [F(0), Action("W", 0), B(0)]}, "rank 0: W0 (action 1) comes before its B0")
    broken({0: [F(0), Action("STEP", 0), B(0)]}, "rank 0: STEP 0 (action 1) comes before B0")
    broken({0: [send_act(0, 1), F(0), recv_grad(0, 1), B(0)], 1: GOOD[1]},
           "rank 0: SEND_ACT 0→1 (action 0) comes before F0, which computes what it sends")


def test_check_refuses_malformed_input_in_words():
    broken({1: []}, "a schedule maps ranks 0..p−1 to lists of actions")
    broken({0: ["F0"]}, "rank 0: action 0 is 'F0', not an Action")
    broken({0: [Action("SEND_ACT", 0)]}, "a message names its peer rank")
    broken({0: [F(0), send_act(0, 1), B(0)]}, "has no virtual stage 1 to talk to")


def test_simulate_refuses_bad_costs():
    with pytest.raises(ScheduleError, match="weight ≤ backward"):
        simulate(GOOD, 1, 2, weight=3)


def test_the_strategy_refuses_a_deadlocking_schedule_before_any_message():
    """Pipeline checks its schedule first, on every rank alike: no mesh or message is touched."""
    a = Action
    bad = {0: [a("F", 0), a("SEND_ACT", 0, 0, 1), a("F", 1), a("SEND_ACT", 1, 0, 1),
               a("RECV_GRAD", 0, 0, 1), a("B", 0), a("RECV_GRAD", 1, 0, 1), a("B", 1), a("STEP")],
           1: [a("RECV_ACT", 0, 0, 0), a("F", 0), a("B", 0), a("SEND_GRAD", 0, 0, 0),
               a("RECV_ACT", 1, 0, 0), a("F", 1), a("B", 1), a("SEND_GRAD", 1, 0, 0), a("STEP")]}
    model = nn.MLP([3, 4, 2], np.random.default_rng(0))
    with pytest.raises(ScheduleError, match="deadlock with rendezvous sends: rank 0 blocks at "
                                            "SEND_ACT 1→1"):
        Pipeline(model, lambda params: SGD(params, 0.1), Task(None, model, "sample"), None,
                 schedule=bad, ranges=[range(0, 1), range(1, 2)])


@pytest.mark.parametrize("name, v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2),
                                     ("bprio", 1), ("zb-h1", 1)])
def test_the_makespan_alone_is_the_spans_last_end(name, v):
    rng = random.Random(len(name))
    costs = {(r, kind): rng.uniform(0.1, 3.0) for r in range(4) for kind in "FBW"}
    schedule = build(name, 4, 8, v)

    def cost(r, action):
        return costs.get((r, action.kind), 0.0)

    spans = execute_eager(schedule, cost)
    assert makespan_eager(schedule, cost) == max(s.end for row in spans.values() for s in row)
