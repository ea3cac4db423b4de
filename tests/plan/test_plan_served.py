"""Steps that meet at one place, by hand: the busiest server's round of W pushes and pulls,
asynchronous workers held only by it, Hogwild's node memory, EASGD's master."""

import dataclasses

import pytest

from scratchpar.parallel.description import Shape
from scratchpar.parallel.easgd import AsyncEASGD
from scratchpar.parallel.hogwild import Hogwild
from scratchpar.parallel.ps import SyncParameterServer as ParameterServer
from scratchpar.plan.profile import Device, Engine, Link, Profile, Reduce
from scratchpar.plan.served import hogwild, master, parameter_server
from scratchpar.plan.step import update_bytes

SHAPE = Shape(psi=1_000_000, itemsize=4, moments=1, largest=500_000, count=4)
LINK = Link(alpha_s=1e-5, beta_s_per_byte=1e-9)
PROFILE = Profile("by hand", "test", 8, Device("d", 2**34, 1e12, 1e10), LINK, Reduce(1e-12),
                  Engine(2**29))
COMPUTE = (1e-3, 2e-3)


def test_a_synchronous_server_s_round_is_w_pushes_w_pulls_and_one_update():
    w, s = 6, 2
    described = ParameterServer.describe(SHAPE, w + s, servers=s)
    got = parameter_server(described, SHAPE, COMPUTE, w, s, "sync", PROFILE)
    keys = SHAPE.itemsize * SHAPE.psi // s
    header = next(m.nbytes for m in described.sends if m.op == "header")
    round_trip = w * (2 * (LINK.alpha_s + keys * LINK.beta_s_per_byte)
                      + LINK.alpha_s + header * LINK.beta_s_per_byte)
    all_reduce = 2 * (s - 1) * LINK.alpha_s + 8 * LINK.beta_s_per_byte + 4 * 1e-12
    assert got.exposed_s == pytest.approx(round_trip + all_reduce)
    assert got.update_s == pytest.approx((2 + 1 + 2) * keys / 1e10)  # momentum: 1 moment
    assert got.step_s == pytest.approx(sum(COMPUTE) + got.exposed_s + got.update_s)


def test_asynchronous_workers_wait_only_for_a_saturated_server():
    quiet = ParameterServer.describe(SHAPE, 3, servers=2)
    alone = parameter_server(quiet, SHAPE, COMPUTE, 1, 2, "async", PROFILE)
    sent = sum(m.nbytes * m.count for m in quiet.sends)  # payload bytes a rank takes part in
    assert alone.idle_s == 0 and alone.step_s < sum(COMPUTE) + sent * 1e-8
    crowd = ParameterServer.describe(SHAPE, 65, servers=1)
    slow = parameter_server(crowd, SHAPE, COMPUTE, 64, 1, "async", PROFILE)
    served = sum(m.count * (LINK.alpha_s + m.nbytes * LINK.beta_s_per_byte)
                 for m in crowd.sends if m.axis == "workers")
    assert slow.idle_s > 0
    assert slow.step_s == pytest.approx(served + 64 * slow_update(), rel=1e-3)


def slow_update():
    keys = SHAPE.itemsize * SHAPE.psi
    return update_bytes({"parameters": keys, "gradients": keys, "optimizer": keys}) / 1e10


def test_hogwild_s_workers_share_the_node_s_memory_bandwidth():
    described = Hogwild.describe(SHAPE, 4)
    update = update_bytes(described.holds) / 1e10
    few = hogwild(described, COMPUTE, 2, PROFILE)
    assert few.idle_s == 0 and few.step_s == pytest.approx(sum(COMPUTE) + update)
    many = hogwild(described, COMPUTE, 64, PROFILE)
    assert many.step_s == pytest.approx(64 * update)


def test_easgd_s_master_answers_every_worker_one_after_another():
    described = AsyncEASGD.describe(SHAPE, 5, tau=4)
    fast = dataclasses.replace(PROFILE, device=dataclasses.replace(PROFILE.device,
                                                                   bytes_per_s=1e14))
    one = master(described, COMPUTE, 1, fast)
    assert one.idle_s == 0
    many = master(described, COMPUTE, 400, fast)
    own = sum(m.count * (LINK.alpha_s + m.nbytes * LINK.beta_s_per_byte)
              for m in described.sends)
    centre = 4 * described.holds["parameters"] / 4 / 1e14  # an exchange every τ = 4 steps
    assert many.step_s == pytest.approx(400 * (own + centre))
