"""The local step's verdict (parallel/local_step.py) on real ranks: every rank backpropagates
its own shard's mean loss, agrees on the global batch's mean loss and units, and skips alike
when any rank's loss or gradient is not finite."""

import dp_helpers as dp_cases
import numpy as np
from device_helpers import host
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.data.shard import shard
from scratchpar.optim import SGD
from scratchpar.optim.clip import global_grad_norm
from scratchpar.parallel import SingleDevice, local_step


@settings(max_examples=8)
@given(model=st.sampled_from(("mlp", "gpt", "lstm")), extra=st.integers(0, 5),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_each_rank_steps_on_its_own_mean_and_all_agree_on_the_global_loss(comm, model,
                                                                          extra, seed):
    mine, one = dp_cases.make_task(model, seed), dp_cases.make_task(model, seed)
    batch = dp_cases.make_batch(model, comm.size + extra, seed)  # rows not divisible
    rows = shard(batch, comm.rank, comm.size)
    own = SingleDevice(mine.model, lambda params: SGD(params, 0.1), mine)
    loss, units, _ = own.backward_mean(rows)
    verdict = local_step.agree(comm, mine.model.parameters(), loss, units)
    want = one.loss(one.model, batch)  # one device's mean over the global batch
    assert verdict.finite and verdict.units == float(one.count(batch))
    np.testing.assert_allclose(verdict.loss, float(host(want.data)), rtol=1e-10)
    alone = one.loss(one.model, rows)  # this rank's own mean gradient, on one device
    alone.backward()
    np.testing.assert_allclose(verdict.norm, global_grad_norm(one.model.parameters()),
                               rtol=1e-10)
    for p, q in zip(mine.model.parameters(), one.model.parameters()):
        np.testing.assert_allclose(host(p.grad), host(q.grad), rtol=1e-10, atol=1e-14)
    assert len(set(comm.allgather_obj(verdict.loss))) == 1  # every rank holds the same loss


@settings(max_examples=6)
@given(poisoned=st.integers(0, 3), seed=st.integers(0, 2**31))
@shared_verdict
def test_a_non_finite_rank_makes_every_rank_skip(comm, poisoned, seed):
    task = dp_cases.make_task("mlp", seed)
    rows = shard(dp_cases.make_batch("mlp", 2 * comm.size, seed), comm.rank, comm.size)
    params = task.model.parameters()
    before = [host(p.data).copy() for p in params]
    with np.errstate(all="ignore"):
        loss = task.loss(task.model, rows, "sum")
        if comm.rank == poisoned % comm.size:
            loss = loss + float("inf")
        loss.backward()
        verdict = local_step.agree(comm, params, loss.data, task.count(rows))

        class Untouched(SGD):  # an optimizer that must not step
            def step(self):
                raise AssertionError("a skipped step reached the optimizer")

        metrics = verdict.step(Untouched(params, 0.1), params, grad_clip=1.0)
    assert not verdict.finite and metrics["skipped"]
    for p, b in zip(params, before):
        np.testing.assert_array_equal(host(p.data), b)
