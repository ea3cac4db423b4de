"""Local SGD on real ranks: every=1 equals data parallelism, and averaging makes replicas equal."""

import dp_helpers as dp_cases
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.optim import SGD
from scratchpar.parallel import DataParallel, LocalSGD

kinds = st.sampled_from(("mlp", "gpt", "lstm"))


@settings(max_examples=6)
@given(kind=kinds, per_rank=st.integers(1, 3), seed=st.integers(0, 2**31))
@shared_verdict
def test_every_step_averaging_equals_data_parallel(comm, kind, per_rank, seed):
    """Averaging parameters after each step equals averaging gradients before it only for plain
    SGD (no momentum) from identical parameters, with every shard holding as many units: equal
    rows per rank and no padding. Those are the conditions here."""
    local, sync = dp_cases.make_task(kind, seed + comm.rank), dp_cases.make_task(kind, seed)
    lsgd = LocalSGD(local.model, SGD(local.model.parameters(), lr=0.1), local.loss, local.count,
                    comm, every=1)
    dp = DataParallel(sync.model, SGD(sync.model.parameters(), lr=0.1), sync.loss, sync.count,
                      comm)
    for step in range(3):
        batch = dp_cases.make_batch(kind, per_rank * comm.size, seed + step, pad=False)
        got, want = lsgd.step(batch), dp.step(batch)
        np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-10)
        assert len(set(dp_cases.replica_digests(comm, local.model))) == 1
    dp_cases.assert_close([p.data for p in local.model.parameters()],
                          [p.data for p in sync.model.parameters()], rtol=1e-10, atol=1e-13)


@settings(max_examples=5)
@given(kind=kinds, rows=st.integers(0, 9), every=st.integers(0, 3), warmup=st.integers(0, 2),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_replicas_are_identical_after_warmup_each_averaging_and_finish(comm, kind, rows, every,
                                                                       warmup, seed):
    task = dp_cases.make_task(kind, seed + comm.rank)
    lsgd = LocalSGD(task.model, SGD(task.model.parameters(), lr=0.1, momentum=0.5), task.loss,
                    task.count, comm, every=every, warmup=warmup)
    for step in range(1, 5):
        lsgd.step(dp_cases.make_batch(kind, rows + 1, seed + step))
        local = step - warmup
        if local <= 0 or (every and local % every == 0):
            assert len(set(dp_cases.replica_digests(comm, task.model))) == 1
    lsgd.finish()
    assert len(set(dp_cases.replica_digests(comm, task.model))) == 1
    assert lsgd.state_dict()["local_sgd"]["steps"] == 4
