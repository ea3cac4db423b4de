"""The time of a description's messages: the ring's α-β-γ terms by hand, the halves of an
all-reduce, ZeRO-3's 1.5× DP's volume (Rajbhandari et al. 2020, §7), and the links each axis
takes."""

import dataclasses

import pytest

from scratchpar.parallel import DataParallel, ZeRO3
from scratchpar.parallel.description import Description, Message, Shape
from scratchpar.plan.messages import communication, seconds
from scratchpar.plan.profile import Device, Engine, Link, Profile, Reduce

LINK = Link(alpha_s=5e-6, beta_s_per_byte=1e-9)  # 5 µs, 1 GB/s
GAMMA = 1e-10
CLUSTER = Profile("test", "by hand", 4, Device("d", 2**34, 1e12, 1e11), LINK, Reduce(GAMMA),
                  Engine(2**29), network=Link(2e-5, 1e-8))
SHAPE = Shape(psi=10_000_000, itemsize=4, moments=2, largest=1_000_000, count=40)


def test_the_ring_all_reduce_costs_its_steps_bytes_and_reductions():
    n, p = 1_000_000, 4
    ring = seconds(Message("all-reduce", "dp", n, 3), p, LINK, GAMMA)
    assert ring == pytest.approx(3 * (2 * 3 * 5e-6 + 2 * 0.75 * n * 1e-9 + 0.75 * n * 1e-10))


def test_an_all_reduce_is_its_reduce_scatter_then_its_all_gather():
    n, p = 4_000_000, 8
    halves = sum(seconds(Message(op, "dp", n, 1), p, LINK, GAMMA)
                 for op in ("reduce-scatter", "all-gather"))
    assert halves == pytest.approx(seconds(Message("all-reduce", "dp", n, 1), p, LINK, GAMMA))


@pytest.mark.parametrize("op, want", [("send", 5e-6 + 1e-3), ("pull", 5e-6 + 1e-3),
                                      ("accumulate", 5e-6 + 1e-3 + 1e-4)])
def test_a_point_to_point_message_costs_alpha_and_its_bytes(op, want):
    assert seconds(Message(op, "pp", 1_000_000, 1), 2, LINK, GAMMA) == pytest.approx(want)


def test_a_collective_of_one_rank_costs_nothing_and_an_unknown_kind_is_refused():
    assert seconds(Message("all-reduce", "dp", 10**6, 5), 1, LINK, GAMMA) == 0
    with pytest.raises(ValueError, match="no cost for a message of kind 'gossip'"):
        seconds(Message("gossip", "dp", 8, 1), 2, LINK, GAMMA)


def test_zero_3_moves_one_and_a_half_times_dp_s_bytes():
    bytes_only = dataclasses.replace(CLUSTER, node=Link(0.0, 1e-9), reduce=Reduce(0.0))
    dp = communication(DataParallel.describe(SHAPE, 8), {"dp": 8}, bytes_only)
    zero = communication(ZeRO3.describe(SHAPE, 8), {"dp": 8}, bytes_only)
    assert sum(zero.values()) / sum(dp.values()) == pytest.approx(1.5, rel=1e-3)
    assert set(dp) == {"backward"} and set(zero) >= {"forward", "backward"}


def test_an_axis_across_nodes_takes_the_network():
    described = Description({}, (Message("all-reduce", "dp", 10**6, 1, "backward"),))
    inside = communication(described, {"dp": 16}, CLUSTER)["backward"]
    across = communication(described, {"dp": 16}, CLUSTER, frozenset({"dp"}))["backward"]
    assert across / inside == pytest.approx(
        (30 * 2e-5 + 1.875e6 * 1e-8 + 0.9375e6 * GAMMA) / (30 * 5e-6 + 1.875e6 * 1e-9
                                                           + 0.9375e6 * GAMMA))
    with pytest.raises(ValueError, match="no rank count for the 'dp' axis"):
        communication(described, {"tp": 2}, CLUSTER)


def test_each_collective_call_costs_the_engine_s_own_time_and_a_message_does_not():
    link = Link(1e-6, 1e-9)
    reduce = Message("all-reduce", "dp", 1000, 3)
    send = Message("send", "pp", 1000, 3)
    assert seconds(reduce, 4, link, 0.0, call_s=5e-6) == pytest.approx(
        seconds(reduce, 4, link, 0.0) + 3 * 5e-6)
    assert seconds(send, 4, link, 0.0, call_s=5e-6) == seconds(send, 4, link, 0.0)
    assert seconds(reduce, 1, link, 0.0, call_s=5e-6) == 0.0  # one rank: no call at all
