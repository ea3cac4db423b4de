"""The synchronous parameter server on real ranks equals one device: losses, gradient norms and
every parameter after three steps, on the workers (which pulled them) and on the servers (their
key ranges), for every split of the world into 1–2 servers and at least one worker."""

import numpy as np
import pytest
from device_helpers import host
from dp_helpers import make_batch, make_task
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.optim import SGD, Adam
from scratchpar.parallel import SingleDevice
from scratchpar.parallel.ps.sync import SyncParameterServer

LIVE: list = []  # the last strategy's communicators, freed before the next is built


def optimizer(adam: bool):
    return lambda params: Adam(params, lr=0.01) if adam else SGD(params, lr=0.1, momentum=0.9)


@settings(max_examples=8)
@given(kind=st.sampled_from(("mlp", "gpt")), servers=st.integers(1, 2), adam=st.booleans(),
       clip=st.sampled_from((0.0, 0.5)), extra=st.integers(0, 3), seed=st.integers(0, 2**31))
@shared_verdict
def test_three_synchronous_steps_equal_three_single_device_steps(comm, kind, servers, adam,
                                                                 clip, extra, seed):
    if comm.size < 2:
        pytest.skip("a parameter server needs a server and a worker")
    servers = min(servers, comm.size - 1)
    while LIVE:
        LIVE.pop()()
    mine, one = make_task(kind, seed), make_task(kind, seed)
    ps = SyncParameterServer(mine.model, optimizer(adam), mine.loss, mine.count, comm, servers,
                             clip)
    LIVE.append(ps.close)
    single = SingleDevice(one.model, optimizer(adam)(one.model.parameters()),
                          lambda model, b: one.loss(model, b, "mean"), clip)
    got, want = [], []
    for step in range(3):
        batch = make_batch(kind, (comm.size - servers) + extra + step, seed + step)
        got.append(ps.step(batch))
        want.append(single.step(batch))
    for g, w in zip(got, want):
        np.testing.assert_allclose([g["loss"], g["grad_norm"]], [w["loss"], w["grad_norm"]],
                                   rtol=1e-10)
    whole = [host(p.data) for p in one.model.parameters()]
    tol = {"rtol": 1e-9, "atol": 1e-10 if adam else 1e-13}  # Adam: see test_mpi_dp
    if ps.is_server:
        np.testing.assert_allclose(host(ps.flat.data), ps.ranges.gather(whole, comm.rank), **tol)
    else:
        for p, w in zip(mine.model.parameters(), whole):
            np.testing.assert_allclose(host(p.data), w, **tol)


@shared_verdict
def test_a_world_without_a_worker_is_refused(comm):
    task = make_task("mlp", 0)
    with pytest.raises(ValueError, match="leave no worker"):
        SyncParameterServer(task.model, optimizer(False), task.loss, task.count, comm,
                            comm.size)
