"""Bucketed all-reduce on real ranks: many random arrays summed over ranks, bucket by bucket.
The arrays live on the test's device; sums are compared on the host."""

import numpy as np
from device_helpers import host, on_device
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.comm.buckets import Buckets

RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}


def arrays_of(seed, rank, specs):
    """Rank ``rank``'s arrays (on the host): every rank can build every rank's from the seed."""
    rng = np.random.default_rng([seed, rank])
    return [rng.standard_normal(shape).astype(dtype) for shape, dtype in specs]


def on_device_all(arrays):
    return [on_device(a) for a in arrays]


def expected_sum(seed, size, specs):
    per_rank = [arrays_of(seed, r, specs) for r in range(size)]
    return [np.sum([np.float64(1) * a[i] for a in per_rank], axis=0) for i in range(len(specs))]


def assert_close(got, want):
    for g, w in zip(map(host, got), want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=RTOL[g.dtype], atol=RTOL[g.dtype])


specs_strategy = st.lists(st.tuples(st.lists(st.integers(0, 40), max_size=2),
                                    st.sampled_from((np.float32, np.float64))),
                          min_size=1, max_size=10)


@settings(max_examples=15)
@given(specs=specs_strategy, limit=st.integers(1, 2000), seed=st.integers(0, 2**31))
@shared_verdict
def test_bucketed_all_reduce_is_the_sum_over_ranks(comm, specs, limit, seed):
    mine = on_device_all(arrays_of(seed, comm.rank, specs))
    plan = Buckets(mine, limit)
    plan.pack(mine)
    got = plan.finish(plan.start_all(comm))
    assert_close(got, expected_sum(seed, comm.size, specs))
    assert_close(mine, arrays_of(seed, comm.rank, specs))  # the inputs are left alone


@settings(max_examples=8)
@given(specs=specs_strategy, limit=st.integers(1, 2000), seed=st.integers(0, 2**31))
@shared_verdict
def test_buckets_started_as_they_fill_in_reverse_average_into_given_outputs(comm, specs, limit,
                                                                            seed):
    """As data parallelism does it: pack a bucket and start it at once, last bucket first."""
    mine = on_device_all(arrays_of(seed, comm.rank, specs))
    plan = Buckets(mine, limit)
    handles = []
    for k in reversed(range(len(plan))):
        plan.pack(mine, bucket=k)
        handles.append(plan.start(comm, k, op="avg"))
    out = [on_device(np.empty(a.shape, a.dtype)) for a in mine]
    assert plan.finish(handles, out) is out
    assert_close(out, [s / comm.size for s in expected_sum(seed, comm.size, specs)])


@shared_verdict
def test_the_buffers_are_reused_step_after_step(comm):
    specs = [((5, 3), np.float64), ((0,), np.float32), ((7,), np.float32), ((300,), np.float64)]
    plan = Buckets(on_device_all(arrays_of(0, comm.rank, specs)), 128)
    buffers = [plan.buffer(k) for k in range(len(plan))]
    for step in range(3):
        mine = on_device_all(arrays_of(step, comm.rank, specs))
        plan.pack(mine)
        got = plan.finish(plan.start_all(comm, algorithm="ring" if step else "auto"))
        assert_close(got, expected_sum(step, comm.size, specs))
        assert all(b is plan.buffer(k) for k, b in enumerate(buffers))
