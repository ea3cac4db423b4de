"""The time of a description's messages: the ring's α-β-γ terms by hand, the halves of an
all-reduce, ZeRO-3's 1.5× DP's volume (Rajbhandari et al. 2020, §7), the links each axis
takes, and context parallelism's K and V of G key/value heads."""

import dataclasses

import pytest

from scratchpar.parallel import DataParallel, ZeRO3
from scratchpar.parallel.context import traffic
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


@pytest.mark.parametrize("scheme", ["ring", "allgather"])
def test_context_parallelism_moves_keys_and_values_of_g_heads_g_over_h_of_the_bytes(scheme):
    """The ring and the all-gather move K and V alone: with G = H/r key/value heads, 1/r of
    multi-head attention's bytes (and of their time, α aside)."""
    a, cp, layers = 3 * 2**20, 4, 6
    whole = traffic(scheme, cp, a, layers, 2)
    for per_group in (2, 8):
        grouped = traffic(scheme, cp, a, layers, 2, per_group)
        assert [(m.op, m.count, m.behind) for m in grouped] == [
            (m.op, m.count, m.behind) for m in whole]
        assert [m.nbytes * per_group for m in grouped] == [m.nbytes for m in whole]
        free = dataclasses.replace(LINK, alpha_s=0.0)
        assert sum(seconds(m, cp, free, GAMMA) for m in grouped) == pytest.approx(
            sum(seconds(m, cp, free, GAMMA) for m in whole) / per_group)


def test_ulysses_moves_q_and_the_output_whole_and_k_and_v_of_g_heads():
    a, cp, layers, per_group = 3 * 2**20, 4, 6, 8
    assert traffic("ulysses", cp, a, layers) == tuple(
        Message("all-to-all", "cp", a, 4 * layers, phase) for phase in ("forward", "backward"))
    moved = {phase: sum(m.nbytes * m.count for m in traffic("ulysses", cp, a, layers, 4,
                                                             per_group) if m.behind == phase)
             for phase in ("forward", "backward")}
    assert moved == dict.fromkeys(("forward", "backward"), layers * (2 * a + 2 * a // per_group))
