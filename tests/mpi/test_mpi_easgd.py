"""Synchronous EASGD on real ranks: with ρ = 0 every worker is an independent SGD on its shard,
bit for bit; on a quadratic the centre follows its closed form; the centre is the same on every
rank; and a checkpoint resumes where it stopped."""

import hashlib

import numpy as np
import pytest
from device_helpers import host, on_device
from dp_helpers import make_batch, make_task
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar import nn
from scratchpar.autograd import Tensor
from scratchpar.autograd import functional as F
from scratchpar.data.shard import shard
from scratchpar.nn.module import Parameter
from scratchpar.optim import SGD
from scratchpar.parallel import SingleDevice
from scratchpar.parallel.easgd import SyncEASGD

CURVATURE = 0.8  # h in fᵢ(x) = ½ h ‖x − cᵢ‖²


class Point(nn.Module):
    """A model that is one parameter vector x (D,)."""

    def __init__(self, x0):
        self.x = Parameter(x0)


def quadratic(model, targets, reduction="mean"):
    """½ h ‖x − c‖² per row c of ``targets`` (rows, D), averaged (or summed) over the rows."""
    diff = model.x - Tensor(targets)  # (rows, D)
    per_row = F.sum(diff * diff, axis=1) * (CURVATURE / 2)  # (rows,)
    return F.mean(per_row) if reduction == "mean" else F.sum(per_row)


def sgd(lr=0.1, momentum=0.0):
    """The factory of SGD at ``lr``, with Nesterov momentum where ``momentum`` > 0."""
    return lambda params: SGD(params, lr, momentum=momentum, nesterov=momentum > 0)


def easgd(mesh, task, rho, tau, lr=0.1, momentum=0.0):
    return SyncEASGD(task.model, sgd(lr, momentum), task, mesh, rho=rho, tau=tau)


@settings(max_examples=6)
@given(kind=st.sampled_from(("mlp", "gpt")), momentum=st.sampled_from((0.0, 0.9)),
       tau=st.integers(1, 3), seed=st.integers(0, 2**31))
@shared_verdict
def test_zero_rho_leaves_every_worker_an_independent_sgd(comm, mesh, kind, momentum, tau, seed):
    mine, alone = make_task(kind, seed), make_task(kind, seed)
    strategy = easgd(mesh, mine, 0.0, tau, momentum=momentum)
    single = SingleDevice(alone.model, sgd(0.1, momentum), alone)
    for step in range(4):
        batch = make_batch(kind, 2 * comm.size + step, seed + step)
        strategy.step(batch)
        single.step(shard(batch, comm.rank, comm.size))  # this worker's rows, alone
    for p, q in zip(mine.model.parameters(), alone.model.parameters()):
        assert np.array_equal(host(p.data), host(q.data))


def centre_closed_form(x0, targets, lr, rho, tau, steps):
    """x̃ after ``steps`` steps, from the mean dynamics of eqs. 3–4 on fᵢ = ½ h ‖x − cᵢ‖²: with
    u = x̄ − c̄ and v = x̃ − c̄, a step with an exchange maps (u, v) by
    M = [[1 − α − ηh, α], [pα, 1 − pα]] (α = ηρ), a step without by [[1 − ηh, 0], [0, 1]]."""
    p, alpha = len(targets), lr * rho
    exchange = np.array([[1 - alpha - lr * CURVATURE, alpha], [p * alpha, 1 - p * alpha]])
    local = np.array([[1 - lr * CURVATURE, 0.0], [0.0, 1.0]])
    walk = np.eye(2)
    for t in range(steps):
        walk = (exchange if t % tau == 0 else local) @ walk
    mean = targets.mean(axis=0)  # c̄ (D,)
    u, v = walk @ np.stack([x0 - mean, x0 - mean])  # (2, D)
    return mean + v


@settings(max_examples=8)
@given(rho=st.floats(0.05, 2.0), tau=st.integers(1, 4), seed=st.integers(0, 2**31))
@shared_verdict
def test_the_centre_follows_its_closed_form_on_a_quadratic(comm, mesh, rho, tau, seed):
    gen = np.random.default_rng(seed)
    x0, targets = gen.standard_normal(5), gen.standard_normal((comm.size, 5))  # c₀ … c_p−1
    task = type("Quadratic", (), {"model": Point(on_device(x0.copy())),
                                  "loss": staticmethod(quadratic),
                                  "count": staticmethod(len)})
    lr = 0.3 / comm.size  # pα ≤ 0.6: the elastic map is stable (Zhang et al. 2015, §5)
    strategy = easgd(mesh, task, rho, tau, lr=lr)
    for _ in range(9):
        strategy.step(on_device(targets))
    got = host(strategy.centre[0])
    digests = comm.allgather_obj(hashlib.sha256(got.tobytes()).hexdigest())
    np.testing.assert_allclose(got, centre_closed_form(x0, targets, lr, rho, tau, 9),
                               rtol=1e-10, atol=1e-12)
    assert len(set(digests)) == 1  # the same centre on every rank, bit for bit


@shared_verdict
def test_a_checkpoint_resumes_every_worker_and_the_centre(comm, mesh):
    if comm.size < 2:
        pytest.skip("one worker has no elastic partner")
    batches = [make_batch("mlp", 3 * comm.size, step) for step in range(6)]
    straight, stopped = make_task("mlp", 4), make_task("mlp", 4)
    whole = easgd(mesh, straight, 0.5, 2, momentum=0.9)
    first = easgd(mesh, stopped, 0.5, 2, momentum=0.9)
    for batch in batches:
        whole.step(batch)
    for batch in batches[:3]:
        first.step(batch)
    state = comm.allgather_obj(first.state_dict(), "EASGD checkpoint")[0]
    resumed = easgd(mesh, make_task("mlp", 9), 0.5, 2, momentum=0.9)
    resumed.load_state_dict(state)
    for batch in batches[3:]:
        resumed.step(batch)
    for p, q in zip(resumed.params, whole.params):
        assert np.array_equal(host(p.data), host(q.data))
    for c, d in zip(resumed.centre, whole.centre):
        assert np.array_equal(host(c), host(d))
