"""Data parallelism on real ranks equals one device: gradients, k steps, replicas, no_sync."""

import numpy as np
import pytest
from device_helpers import host, on_device
from dp_helpers import assert_close, make_batch, make_task, replica_digests
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar import nn
from scratchpar.data import shard
from scratchpar.data.shard import Part
from scratchpar.optim import SGD, Adam
from scratchpar.parallel import DataParallel, DataParallelNaive, SingleDevice


def strategy(cls, task, make_optimizer, mesh, **kw):
    return cls(task.model, make_optimizer, task, mesh, **kw)


def oracle(task, make_optimizer):
    return SingleDevice(task.model, make_optimizer, task)


def sgd(**kw):
    return lambda params: SGD(params, **kw)


kinds = st.sampled_from(("mlp", "gpt", "lstm"))
dp_classes = st.sampled_from((DataParallel, DataParallelNaive))
rows = st.integers(0, 9)  # fewer rows than ranks, and not divisible by them, included


def dp_kwargs(cls, bucket_bytes):
    return {"bucket_bytes": bucket_bytes} if cls is DataParallel else {}


@settings(max_examples=8)
@given(cls=dp_classes, kind=kinds, rows=rows, bucket_bytes=st.integers(8, 4000),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_one_step_gradient_equals_the_full_batch_gradient(comm, mesh, cls, kind, rows, bucket_bytes,
                                                          seed):
    mine = make_task(kind, seed + comm.rank)  # rank 0's start is broadcast to every replica
    dp = strategy(cls, mine, sgd(lr=0.0), mesh,
                  **dp_kwargs(cls, bucket_bytes))
    one = make_task(kind, seed)
    single = oracle(one, sgd(lr=0.0))
    batch = make_batch(kind, rows + 1, seed)
    got, want = dp.step(batch), single.step(batch)
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-12)
    assert_close([p.grad for p in mine.model.parameters()],
                 [p.grad for p in one.model.parameters()], rtol=1e-10, atol=1e-14)
    assert len(set(comm.allgather_obj(got["loss"]))) == 1


@settings(max_examples=4)
@given(kind=kinds, rows=rows, bucket_bytes=st.integers(8, 400), seed=st.integers(0, 2**31))
@shared_verdict
def test_float32_gradient_equals_the_full_batch_gradient(comm, mesh, kind, rows, bucket_bytes,
                                                         seed):
    mine, one = make_task(kind, seed, np.float32), make_task(kind, seed, np.float32)
    dp = strategy(DataParallel, mine, sgd(lr=0.0), mesh,
                  bucket_bytes=bucket_bytes)
    single = oracle(one, sgd(lr=0.0))
    batch = make_batch(kind, rows + 1, seed, np.float32)
    dp.step(batch)
    single.step(batch)
    assert_close([p.grad for p in mine.model.parameters()],
                 [p.grad for p in one.model.parameters()], rtol=1e-5, atol=1e-6)


@settings(max_examples=6)
@given(cls=dp_classes, kind=kinds, rows=rows, bucket_bytes=st.integers(8, 4000),
       adam=st.booleans(), clip=st.sampled_from((0.0, 0.5)), seed=st.integers(0, 2**31))
@shared_verdict
def test_three_steps_equal_three_single_device_steps_and_replicas_stay_identical(
        comm, mesh, cls, kind, rows, bucket_bytes, adam, clip, seed):
    def optimizer(params):
        return Adam(params, lr=0.01) if adam else SGD(params, lr=0.1, momentum=0.9)

    mine, one = make_task(kind, seed + comm.rank), make_task(kind, seed)
    dp = strategy(cls, mine, optimizer, mesh, grad_clip=clip,
                  **dp_kwargs(cls, bucket_bytes))
    single = SingleDevice(one.model, optimizer, one, grad_clip=clip)
    for step in range(3):
        batch = make_batch(kind, rows + step, seed + step)
        got, want = dp.step(batch), single.step(batch)
        assert got.keys() == want.keys()
        assert_close(list(got.values()), list(want.values()), rtol=1e-9, atol=1e-12)
    # Gradients that are 0 in exact arithmetic (GPT has some) differ by rounding, ~1e-17; Adam
    # divides them by √v + ε, which moves such a parameter by up to lr · 1e-17 / ε ≈ 1e-11.
    assert_close([p.data for p in mine.model.parameters()],
                 [p.data for p in one.model.parameters()], rtol=1e-9, atol=1e-10)
    assert len(set(replica_digests(comm, mine.model))) == 1


@settings(max_examples=5)
@given(kind=kinds, first=rows, second=rows, bucket_bytes=st.integers(8, 4000),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_no_sync_accumulation_equals_one_step_on_the_joined_batch(comm, mesh, kind, first, second,
                                                                  bucket_bytes, seed):
    mine, one = make_task(kind, seed), make_task(kind, seed)
    dp = strategy(DataParallel, mine, sgd(lr=0.1), mesh,
                  bucket_bytes=bucket_bytes)
    single = oracle(one, sgd(lr=0.1))
    a, b = make_batch(kind, first, seed), make_batch(kind, second + 1, seed + 1)
    with dp.no_sync():
        micro = dp.step(a)
    assert type(micro["loss"]) is float  # a host number, on every device
    got = dp.step(b)
    def join(*parts):
        return on_device(np.concatenate([host(p) for p in parts]))

    joined = tuple(map(join, a, b)) if kind == "mlp" else join(a, b)
    want = single.step(joined)
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-12)
    assert_close([p.grad for p in mine.model.parameters()],
                 [p.grad for p in one.model.parameters()], rtol=1e-10, atol=1e-14)
    assert_close([p.data for p in mine.model.parameters()],
                 [p.data for p in one.model.parameters()], rtol=1e-10, atol=1e-14)
    assert len(set(replica_digests(comm, mine.model))) == 1


@settings(max_examples=4)
@given(cls=dp_classes, rows=rows, bucket_bytes=st.integers(8, 4000), seed=st.integers(0, 2**31))
@shared_verdict
def test_a_parameter_backward_never_reaches_gets_a_zero_gradient(comm, mesh, cls, rows,
                                                                  bucket_bytes, seed):
    """An unused parameter still takes part in its bucket: its gradient is zeros on every rank,
    and the others still equal the single-device gradient."""
    mine, one = make_task("mlp", seed), make_task("mlp", seed)
    for task in (mine, one):
        task.model.unused = nn.Parameter(on_device(np.full((3, 2), 7.0)))
    dp = strategy(cls, mine, sgd(lr=0.1), mesh,
                  **dp_kwargs(cls, bucket_bytes))
    batch = make_batch("mlp", rows, seed)
    dp.step(batch)
    single = oracle(one, sgd(lr=0.1))
    single.step(batch)
    assert np.array_equal(host(mine.model.unused.grad), np.zeros((3, 2)))
    used = [(p, q) for p, q in zip(mine.model.parameters(), one.model.parameters())
            if p is not mine.model.unused]
    assert_close([p.grad for p, _ in used], [q.grad for _, q in used], rtol=1e-10, atol=1e-12)


@shared_verdict
def test_a_gradient_alone_in_its_bucket_is_reduced_in_place_without_a_buffer(comm, mesh):
    """Buckets of 8 bytes hold one array each: every gradient is reduced where it lies, so no
    bucket buffer is ever allocated, and the step still equals one device's."""
    mine, one = make_task("mlp", 7), make_task("mlp", 7)
    dp = strategy(DataParallel, mine, sgd(lr=0.1), mesh, bucket_bytes=8)
    assert all(len(m) == 1 for m in dp.plan.members)
    batch = make_batch("mlp", 5, 7)
    for _ in range(2):
        dp.step(batch)
    oracle(one, sgd(lr=0.1)).step(batch)
    oracle(one, sgd(lr=0.1)).step(batch)
    assert dp.plan.allocated_bytes() == 0
    assert_close([p.data for p in mine.model.parameters()],
                 [p.data for p in one.model.parameters()], rtol=1e-10, atol=1e-14)


@settings(max_examples=6)
@given(cls=dp_classes, kind=kinds, rows=rows, seed=st.integers(0, 2**31))
@shared_verdict
def test_a_rank_handed_its_rows_alone_steps_as_with_the_whole_batch(comm, mesh, cls, kind, rows,
                                                                    seed):
    """The training loop draws only :meth:`rows` for data parallelism; the step is the same,
    bit for bit, and reports the units of every rank's rows, which the loop did not count."""
    batch = make_batch(kind, rows + 1, seed)
    after = []
    for part in (False, True):
        task = make_task(kind, seed + comm.rank)
        dp = strategy(cls, task, sgd(lr=0.1), mesh)
        start, stop = dp.rows(rows + 1)
        handed = Part(shard(batch, comm.rank, comm.size), start, stop, rows + 1) if part \
            else batch
        metrics = dp.step(handed)
        after.append((metrics, [host(p.data).copy() for p in task.model.parameters()]))
    (whole, want), (got_metrics, got) = after
    assert got_metrics.pop("units") == float(task.count(batch)) and "units" not in whole
    assert got_metrics == whole
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    wrong = Part(shard(batch, comm.rank, comm.size), start, stop, rows + 2)
    if (start, stop) != dp.rows(rows + 2):
        with pytest.raises(ValueError, match="reads rows"):
            dp.step(wrong)
