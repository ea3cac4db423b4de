"""The synchronous parameter server on real ranks equals one device: losses, gradients and
every parameter after three steps, on the workers (which pulled them) and on the servers (their
key ranges), for every split of the world into 1–2 servers and at least one worker."""

import numpy as np
import pytest
from device_helpers import host
from dp_helpers import assert_same_state, make_batch, make_task, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.optim import SGD, Adam
from scratchpar.parallel import SingleDevice
from scratchpar.parallel.ps.sync import SyncParameterServer

LIVE: list = []  # the last strategy's communicators, freed before the next is built


def optimizer(adam: bool):
    return lambda params: Adam(params, lr=0.01) if adam else SGD(params, lr=0.1, momentum=0.9)


def parameter_server(comm, mesh, kind: str, seed: int, servers: int, adam: bool,
                     clip: float = 0.0):
    """A synchronous parameter server of ``kind`` on at most size − 1 servers, and one device
    beside it from the same weights: ``(ps, its model, the one-device strategy, its model)``.
    The previous test's communicators are freed first."""
    if comm.size < 2:
        pytest.skip("a parameter server needs a server and a worker")
    while LIVE:
        LIVE.pop()()
    mine, one = make_task(kind, seed), make_task(kind, seed)
    ps = SyncParameterServer(mine.model, optimizer(adam), mine, mesh,
                             servers=min(servers, comm.size - 1), grad_clip=clip)
    LIVE.append(ps.close)
    single = SingleDevice(one.model, optimizer(adam), one, grad_clip=clip)
    return ps, mine.model, single, one.model


@settings(max_examples=8)
@given(kind=st.sampled_from(("mlp", "gpt")), servers=st.integers(1, 2), adam=st.booleans(),
       clip=st.sampled_from((0.0, 0.5)), extra=st.integers(0, 3), seed=st.integers(0, 2**31))
@shared_verdict
def test_three_synchronous_steps_equal_three_single_device_steps(comm, mesh, kind, servers,
                                                                 adam, clip, extra, seed):
    ps, model, single, one = parameter_server(comm, mesh, kind, seed, servers, adam, clip)
    got, want, grads = [], [], []
    for step in range(3):
        batch = make_batch(kind, ps.workers + extra + step, seed + step)
        got.append(ps.step(batch))
        want.append(single.step(batch))
        if ps.is_server:  # the combined (and clipped) gradient of this server's range
            grads.append((host(ps.flat.grad).copy(), ps.ranges.gather(
                [host(p.grad) for p in one.parameters()], comm.rank)))
    for g, w in grads:
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-14)
    for g, w in zip(got, want):
        np.testing.assert_allclose([g["loss"], g["grad_norm"]], [w["loss"], w["grad_norm"]],
                                   rtol=1e-10)
    whole = [host(p.data) for p in one.parameters()]
    tol = {"rtol": 1e-9, "atol": 1e-10 if adam else 1e-13}  # Adam: see test_mpi_dp
    if ps.is_server:
        np.testing.assert_allclose(host(ps.flat.data), ps.ranges.gather(whole, comm.rank), **tol)
    else:
        for p, w in zip(model.parameters(), whole):
            np.testing.assert_allclose(host(p.data), w, **tol)


@shared_verdict
def test_a_world_without_a_worker_is_refused(comm, mesh):
    task = make_task("mlp", 0)
    with pytest.raises(ValueError, match="leave no worker"):
        SyncParameterServer(task.model, optimizer(False), task, mesh, servers=comm.size)


@settings(max_examples=6)
@given(kind=st.sampled_from(("mlp", "gpt")), servers=st.integers(1, 2), seed=st.integers(0, 2**31))
@shared_verdict
def test_a_checkpoint_is_one_devices_and_resumes_on_any_split(comm, mesh, kind, servers, seed):
    """After two steps, rank 0's state is one device's (names and optimizer keys alike); loaded
    into servers started from other weights, with another number of servers, the next step
    equals one device's."""
    ps, model, single, _ = parameter_server(comm, mesh, kind, seed, servers, adam=True)
    for step in range(2):
        batch = make_batch(kind, comm.size + step, seed + step)
        ps.step(batch)
        single.step(batch)
    state = ps.state_dict()
    ps.gather_model()
    want = snapshot(single.state_dict())
    while LIVE:
        LIVE.pop()()
    other = make_task(kind, seed + 1)
    resumed = SyncParameterServer(other.model, optimizer(True), other, mesh,
                                  servers=comm.size - ps.servers if comm.size > 2 else 1)
    LIVE.append(resumed.close)
    resumed.load_state_dict(want)
    batch = make_batch(kind, comm.size + 3, seed + 5)
    got, expected = resumed.step(batch), single.step(batch)  # every message sent: now assert
    np.testing.assert_allclose(got["loss"], expected["loss"], rtol=1e-10)
    if comm.rank != 0:
        assert state is None
        return
    assert_same_state(state, want)
    for name, p in model.named_parameters():  # gather_model filled rank 0's model
        np.testing.assert_allclose(host(p.data), host(want["model"][name]), rtol=1e-9,
                                   atol=1e-10, err_msg=name)
