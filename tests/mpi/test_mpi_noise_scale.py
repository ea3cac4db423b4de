"""Data parallelism's gradient noise scale on real ranks: each step's estimates are those of the
ranks' shards and the whole batch, computed on one device (McCandlish et al. 2018, A.1)."""

import pytest
from dp_helpers import make_batch, make_task
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.data.shard import rows, shard
from scratchpar.optim import SGD
from scratchpar.optim.noise_scale import NoiseScale, estimate
from scratchpar.parallel import DataParallel, DataParallelNaive
from scratchpar.parallel.noise import NoiseProbe


def mean_gradient_sq(task, batch) -> float:
    """|g|² of the mean gradient over ``batch``'s units, on one device."""
    task.model.zero_grad()
    task.loss(task.model, batch, "sum").backward()
    grads = [p.grad for p in task.model.parameters() if p.grad is not None]
    return sum(float((g * g).sum()) for g in grads) / float(task.count(batch)) ** 2


@settings(max_examples=6)
@given(cls=st.sampled_from((DataParallel, DataParallelNaive)),
       kind=st.sampled_from(("mlp", "gpt", "lstm")), rows_=st.integers(0, 9),
       bucket_bytes=st.integers(8, 4000), seed=st.integers(0, 2**31))
@shared_verdict
def test_a_step_s_estimates_are_those_of_the_ranks_shards(comm, mesh, cls, kind, rows_,
                                                          bucket_bytes, seed):
    mine = make_task(kind, seed + comm.rank)  # rank 0's start is broadcast to every replica
    kw = {"bucket_bytes": bucket_bytes} if cls is DataParallel else {}
    dp = cls(mine.model, lambda params: SGD(params, lr=0.0), mine, mesh, **kw)
    dp.attach(NoiseProbe(NoiseScale(decay=0.5)))
    batch = make_batch(kind, rows_ + 1, seed)
    got = dp.step(batch)
    one = make_task(kind, seed)
    shards = [shard(batch, r, comm.size) for r in range(comm.size)]
    want = estimate([mean_gradient_sq(one, s) if rows(s) else 0.0 for s in shards],
                    [rows(s) for s in shards], mean_gradient_sq(one, batch))
    if want is None:  # one rank holds every row: nothing tells noise from signal
        assert got["gradient_sq"] is got["gradient_trace"] is got["noise_scale"] is None
        return
    assert got["gradient_sq"] == pytest.approx(want.gradient_sq, rel=1e-8, abs=1e-12)
    assert got["gradient_trace"] == pytest.approx(want.trace, rel=1e-8, abs=1e-12)
    if want.gradient_sq > 0:  # one step's |G|² may come out negative: no ratio yet
        assert got["noise_scale"] == pytest.approx(want.trace / want.gradient_sq, rel=1e-6)
    else:
        assert got["noise_scale"] is None
