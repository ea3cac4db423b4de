"""A data-parallel step's prediction by hand: compute at the device's rate, the update at its
bandwidth, and only the communication the compute does not hide."""

import dataclasses

import pytest

from scratchpar.parallel import DataParallel, DataParallelNaive, Hybrid, Pipeline, ZeRO1, ZeRO3
from scratchpar.parallel.description import Shape
from scratchpar.parallel.pipeline.schedules import UNIT_COSTS
from scratchpar.parallel.pipeline.simulator import bubble_formula
from scratchpar.plan import flops
from scratchpar.plan.compute import roofline
from scratchpar.plan.messages import communication
from scratchpar.plan.profile import Device, Engine, Link, Profile, Reduce
from scratchpar.plan.step import data_parallel, even, pipeline, update_bytes

SHAPE = Shape(psi=4_000_000, itemsize=4, moments=2, largest=1_000_000, count=8)
WORK = flops.mlp([1000, 2000, 2000, 10])  # per sample
FAST = Profile("fast links", "by hand", 8, Device("d", 2**34, 1e12, 1e11),
               Link(1e-6, 1e-11), Reduce(1e-12), Engine(2**29))
SLOW = dataclasses.replace(FAST, node=Link(1e-4, 1e-8))


def test_fast_links_hide_dp_s_buckets_behind_backward():
    described = DataParallel.describe(SHAPE, 4)
    got = data_parallel(described, roofline(WORK, 64, FAST), 4, FAST)
    assert got.forward_s == pytest.approx(64 * WORK.forward / 1e12)
    assert got.backward_s == pytest.approx(64 * WORK.backward / 1e12)
    assert got.communication_s["backward"] < got.backward_s and got.exposed_s == 0
    assert got.update_s == pytest.approx(7 * SHAPE.bytes / 1e11)  # 2P + G + 2·(2P) of Adam
    assert got.step_s == pytest.approx(got.forward_s + got.backward_s + got.update_s)


def test_the_update_pays_the_engine_s_cost_for_each_array_it_steps():
    described = DataParallel.describe(SHAPE, 4)
    engine = dataclasses.replace(FAST, engine=Engine(2**29, array_s=2e-6))
    got, bare = (data_parallel(described, (0.0, 0.0), 4, p) for p in (engine, FAST))
    assert described.arrays == 8 * 3  # each parameter array and Adam's two moments
    assert got.update_s == pytest.approx(bare.update_s + 24 * 2e-6)


def test_slow_links_expose_what_backward_cannot_cover():
    described = DataParallel.describe(SHAPE, 4)
    got = data_parallel(described, roofline(WORK, 64, SLOW), 4, SLOW)
    backward = communication(described, {"dp": 4}, SLOW)["backward"]
    assert got.exposed_s == pytest.approx(backward - got.backward_s) and got.exposed_s > 0


def test_naive_dp_exposes_all_of_its_all_reduces():
    described = DataParallelNaive.describe(SHAPE, 4)
    got = data_parallel(described, roofline(WORK, 64, FAST), 4, FAST)
    assert set(got.communication_s) == {""}
    assert got.exposed_s == pytest.approx(got.communication_s[""])


def test_zero_3_s_gathers_hide_behind_forward_and_its_update_is_a_shard_s():
    described = ZeRO3.describe(SHAPE, 4)
    got = data_parallel(described, roofline(WORK, 64, SLOW), 4, SLOW)
    c = got.communication_s
    assert got.exposed_s == pytest.approx(max(0, c["forward"] - got.forward_s)
                                          + max(0, c["backward"] - got.backward_s)
                                          + c.get("", 0.0))
    assert update_bytes(ZeRO1.describe(SHAPE, 4).holds) < update_bytes(
        DataParallel.describe(SHAPE, 4).holds)


def test_across_nodes_the_network_link_prices_the_messages():
    two_links = dataclasses.replace(FAST, network=SLOW.node)
    described = DataParallel.describe(SHAPE, 16)
    inside = data_parallel(described, roofline(WORK, 8, two_links), 16, two_links)
    across = data_parallel(described, roofline(WORK, 8, two_links), 16, two_links,
                           across_nodes=True)
    assert across.communication_s["backward"] > 100 * inside.communication_s["backward"]


@pytest.mark.parametrize("p, m", [(4, 8), (2, 4), (4, 16)])
def test_a_pipeline_s_idle_time_is_the_bubble_of_its_schedule(p, m):
    """Uniform stages, free messages, one replica: the makespan is (m + p − 1) slots, and the
    idle share (p − 1)/(m + p − 1) (Huang et al. 2019, §2.3)."""
    described = Pipeline.describe(SHAPE, p, pp=p, m=m, rows=8 * m)
    got = pipeline(described, ("gpipe", p, m, 1, UNIT_COSTS), even((1.0, 2.0), p, 1), 0.0,
                   {"pp": p, "world": p, "dp": 1}, FAST)
    makespan = got.step_s - got.update_s - got.exposed_s
    assert makespan == pytest.approx((m + p - 1) * 3.0)
    assert got.idle_s / makespan == pytest.approx(bubble_formula(p, m))
    assert set(got.communication_s) == {""}  # the loss's all-reduce; the sends are in the slots


@pytest.mark.parametrize("p, m", [(4, 8), (2, 4), (4, 16)])
def test_zero_bubble_s_w_fills_what_1f1b_leaves_idle(p, m):
    """F 1, B 1 and W 1 (the weights' half of a backward of 2): 1F1B idles (p − 1)(F + B + W),
    ZB-H1 (p − 1)(F + B − W) (Qi et al. 2023, §3.1), and both compute the same."""
    described = Pipeline.describe(SHAPE, p, pp=p, m=m, rows=8 * m)
    got = {name: pipeline(described, (name, p, m, 1, UNIT_COSTS), even((1.0, 2.0), p, 1), 0.0,
                          {"pp": p, "world": p, "dp": 1}, FAST, weight=0.5)
           for name in ("1f1b", "zb-h1")}
    assert got["1f1b"].idle_s == pytest.approx((p - 1) * 3.0)
    assert got["zb-h1"].idle_s == pytest.approx((p - 1) * 1.0)
    assert (got["zb-h1"].forward_s, got["zb-h1"].backward_s) == \
        (got["1f1b"].forward_s, got["1f1b"].backward_s)


def test_a_pipeline_s_messages_lengthen_every_slot_and_replicas_reduce_after_the_flush():
    p, m = 2, 4
    described = Pipeline.describe(SHAPE, 2 * p, pp=p, m=m, rows=32)
    free = pipeline(described, ("1f1b", p, m, 1, UNIT_COSTS), even((1.0, 2.0), p, 1), 0.0,
                    {"pp": p, "world": 2 * p, "dp": 2}, FAST)
    costly = pipeline(described, ("1f1b", p, m, 1, UNIT_COSTS), even((1.0, 2.0), p, 1), 0.25,
                      {"pp": p, "world": 2 * p, "dp": 2}, FAST)
    assert costly.idle_s - free.idle_s == pytest.approx((m + p - 1) * 2 * 0.25)
    dp_reduce = communication(dataclasses.replace(described, sends=tuple(
        s for s in described.sends if s.axis == "dp")), {"dp": 2}, FAST)[""]
    assert free.exposed_s > dp_reduce > 0


def test_a_hybrid_s_tensor_collectives_lengthen_every_slot_and_are_exposed():
    p, m = 2, 4
    described = Hybrid.describe(dataclasses.replace(SHAPE, depth=4, boundary=64), 4, pp=p,
                                m=m, rows=32, tp=2)
    plain = dataclasses.replace(described, sends=tuple(
        s for s in described.sends if s.axis != "tp"))
    ranks = {"pp": p, "world": 4, "dp": 1, "tp": 2}
    stages = even((1.0, 2.0), p, 1)
    without = pipeline(plain, ("gpipe", p, m, 1, UNIT_COSTS), stages, 0.0, ranks, SLOW)
    got = pipeline(described, ("gpipe", p, m, 1, UNIT_COSTS), stages, 0.0, ranks, SLOW)
    tensor = got.communication_s["tp forward"] + got.communication_s["tp backward"]
    assert tensor > 0 and got.exposed_s == pytest.approx(without.exposed_s + tensor)
    makespan = got.step_s - got.update_s - (got.exposed_s - tensor)
    assert makespan == pytest.approx((m + p - 1) * (3.0 + tensor / m))


def test_uneven_stages_wait_on_the_slowest():
    """Naive, one micro-batch through two stages: F₀, F₁, B₁, B₀ one after another, whatever
    their sizes; GPipe's m micro-batches then wait on the slower stage: its m slots each way,
    the faster one's first forward and last backward around them."""
    p, m = 2, 4
    described = Pipeline.describe(SHAPE, p, pp=p, m=m, rows=32)
    ranks = {"pp": p, "world": p, "dp": 1}
    stages = [(0.5, 1.0), (2.0, 3.0)]  # (forward, backward) of stages 0 and 1
    naive = pipeline(described, ("naive", p, 1, 1, UNIT_COSTS), stages, 0.0, ranks, FAST)
    assert naive.step_s - naive.update_s - naive.exposed_s == pytest.approx(0.5 + 2 + 3 + 1)
    assert (naive.forward_s, naive.backward_s) == (2.0, 3.0)  # the busiest rank's compute
    got = pipeline(described, ("gpipe", p, m, 1, UNIT_COSTS), stages, 0.0, ranks, FAST)
    makespan = got.step_s - got.update_s - got.exposed_s
    assert makespan == pytest.approx(0.5 + m * 2.0 + m * 3.0 + 1.0)
    assert got.idle_s == pytest.approx(0.5 + 1.0)
