"""ZeRO stages 1, 2 and 3, with and without offload, on real ranks equal one device."""

import numpy as np
import pytest
from dp_helpers import assert_close, everywhere, make_batch, make_task, replica_digests
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.optim import SGD, Adam
from scratchpar.parallel import SingleDevice
from scratchpar.parallel.zero import STAGES

kinds = st.sampled_from(("mlp", "gpt", "lstm"))
rows = st.integers(0, 9)  # fewer rows than ranks, and not divisible by them, included


def optimizer(adam: bool):
    return (lambda params: Adam(params, lr=0.01)) if adam else \
        (lambda params: SGD(params, lr=0.1, momentum=0.9))


@pytest.mark.parametrize("offload", [False, True], ids=["device", "offload"])
@pytest.mark.parametrize("stage", sorted(STAGES))
@settings(max_examples=5)
@given(kind=kinds, rows=rows, adam=st.booleans(), bucket_bytes=st.integers(8, 4000),
       tied=st.booleans(), seed=st.integers(0, 2**31))
@shared_verdict
def test_three_steps_equal_one_device_in_gradients_and_parameters(
        comm, mesh, stage, offload, kind, rows, adam, bucket_bytes, tied, seed):
    mine, one = make_task(kind, seed + comm.rank, tied=tied), make_task(kind, seed, tied=tied)
    clip = 0.5 if adam else 0.0  # two set-ups: Adam with clipping, momentum without
    zero = STAGES[stage](mine.model, optimizer(adam), mine, mesh, bucket_bytes=bucket_bytes,
                         grad_clip=clip, offload=offload)
    single = SingleDevice(one.model, optimizer(adam), one, grad_clip=clip)
    for step in range(3):
        batch = make_batch(kind, rows + step, seed + step)
        got, want = zero.step(batch), single.step(batch)
        assert got.keys() == want.keys()
        assert_close(list(got.values()), list(want.values()), rtol=1e-9, atol=1e-12)
        assert_close(zero.gradients(), [p.grad for p in one.model.parameters()], rtol=1e-10,
                     atol=1e-13)
    state = everywhere(comm, zero.state_dict())
    assert_close(list(state["model"].values()), [p.data for p in one.model.parameters()],
                 rtol=1e-9, atol=1e-10)
    if stage < 3:  # the parameters the rank trains with are the gathered ones
        assert len(set(replica_digests(comm, mine.model))) == 1


@pytest.mark.parametrize("stage", sorted(STAGES))
@settings(max_examples=3)
@given(kind=kinds, rows=rows, seed=st.integers(0, 2**31))
@shared_verdict
def test_float32_three_steps_stay_within_float32_rounding(comm, mesh, stage, kind, rows, seed):
    """Momentum (Adam would divide the rounding of gradients that are 0 in exact arithmetic,
    which GPT has, by √v + ε: float32 cannot keep those steps alike)."""
    mine, one = make_task(kind, seed, np.float32), make_task(kind, seed, np.float32)
    zero = STAGES[stage](mine.model, optimizer(False), mine, mesh, bucket_bytes=256,
                         grad_clip=0.5)
    single = SingleDevice(one.model, optimizer(False), one, grad_clip=0.5)
    for step in range(3):
        batch = make_batch(kind, rows + step + 1, seed + step, np.float32)
        zero.step(batch)
        single.step(batch)
        assert_close(zero.gradients(), [p.grad for p in one.model.parameters()], rtol=1e-5,
                     atol=1e-6)
    assert_close(list(everywhere(comm, zero.state_dict())["model"].values()),
                 [p.data for p in one.model.parameters()], rtol=1e-5, atol=1e-6)


@settings(max_examples=6)
@given(saved=st.sampled_from([(1, False), (2, True), (3, False), (3, True)]),
       loaded=st.sampled_from([(1, True), (2, False), (3, False), (3, True)]),
       kind=kinds, adam=st.booleans(), seed=st.integers(0, 2**31))
@shared_verdict
def test_a_checkpoint_resumes_at_another_stage_and_as_one_device(comm, mesh, saved, loaded, kind,
                                                                 adam, seed):
    def zero(stage_offload, task):
        stage, offload = stage_offload
        return STAGES[stage](task.model, optimizer(adam), task, mesh, bucket_bytes=300,
                             grad_clip=0.5, offload=offload)

    first = zero(saved, make_task(kind, seed))
    for step in range(2):
        first.step(make_batch(kind, 5, seed + step))
    state = everywhere(comm, first.state_dict())  # rank 0's, as a checkpoint holds it
    one = make_task(kind, seed + 1)
    single = SingleDevice(one.model, optimizer(adam), one, grad_clip=0.5)
    single.load_state_dict(state)  # the one-device form, whatever the stage that wrote it
    second = zero(loaded, make_task(kind, seed + 2))
    second.load_state_dict(state)
    batch = make_batch(kind, 5, seed + 2)
    got, want = second.step(batch), single.step(batch)
    assert_close([got["loss"]], [want["loss"]], rtol=1e-10)
    after = everywhere(comm, second.state_dict())
    assert_close(list(after["model"].values()), [p.data for p in one.model.parameters()],
                 rtol=1e-9, atol=1e-10)
    assert after["optim"].keys() == single.optimizer.state_dict().keys()
