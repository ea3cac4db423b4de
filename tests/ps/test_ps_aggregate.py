"""Aggregate, then apply: a clock's pushes, held in whatever order they arrive, become the
update one device makes from the global batch, and only complete clocks are applied."""

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.parallel.ps.aggregate import HeldClocks
from scratchpar.parallel.ps.protocol import STEP, Header, weighted_mean


@given(units=st.lists(st.integers(0, 9), min_size=1, max_size=5), seed=st.integers(0, 2**31),
       data=st.data())
def test_a_clock_held_in_any_arrival_order_is_one_devices_update(units, seed, data):
    gen = np.random.default_rng(seed)
    workers = list(range(3, 3 + len(units)))  # worker ranks after three servers
    grads = {w: gen.standard_normal(6) for w in workers}  # each its mean gradient, (K_s,)
    means = {w: float(gen.standard_normal()) for w in workers}
    held = HeldClocks(group=None, servers=1)
    for w in data.draw(st.permutations(workers)):
        n = units[w - 3]
        held.hold(w, grads[w], Header(STEP, clock=4, mean=means[w], units=n, lr=0.1 + w),
                  read=10 + w)
    grad, loss, lr, norm, reads = held.update(4)
    total = sum(units)
    want = sum((n / total if total else 0.0) * grads[w] for n, w in zip(units, workers))
    np.testing.assert_allclose(grad, want, rtol=1e-12, atol=1e-15)
    in_order, _ = weighted_mean([grads[w] for w in workers], [means[w] for w in workers],
                                units)
    np.testing.assert_array_equal(grad, in_order)  # summed in worker order, whatever arrived first
    want_loss = sum((n / total if total else 0.0) * means[w] for n, w in zip(units, workers))
    assert math.isclose(loss, want_loss, rel_tol=1e-12, abs_tol=1e-15)
    assert lr == 0.1 + workers[0]  # the rate of the first worker in worker order
    assert math.isclose(norm, float(np.linalg.norm(want)), rel_tol=1e-12, abs_tol=1e-15)
    assert reads == [10 + w for w in workers]  # the versions, in worker order
    assert held.held == {}  # applied once


def test_only_the_clocks_every_worker_present_has_pushed_are_complete():
    held = HeldClocks(group=None, servers=1)
    for clock in (2, 0, 1):
        held.hold(3, np.zeros(2), Header(STEP, clock=clock, units=1), read=0)
    assert held.complete(slowest=0) == []
    assert held.complete(slowest=2) == [0, 1]  # the slowest worker has finished clocks 0, 1
    assert held.complete(slowest=math.inf) == [0, 1, 2]  # every worker has left
