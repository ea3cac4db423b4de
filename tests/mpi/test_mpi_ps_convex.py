"""Every parameter-server mode converges on a convex problem: multinomial logistic regression,
whose optimum L* the test computes by full-batch gradient descent, reaches within TOLERANCE of
serial SGD's full-data loss after the same samples (the same steps of the same global batches).
"""

import numpy as np
import pytest
from device_helpers import host, on_device
from mpi_helpers import shared_verdict

from scratchpar import nn
from scratchpar.optim import SGD
from scratchpar.parallel import SingleDevice
from scratchpar.parallel.ps import (
    AsyncParameterServer,
    LockedParameterServer,
    SSPParameterServer,
    SyncParameterServer,
    SyncThenAsync,
)
from scratchpar.train.task import Task

N, D, C, BATCH, STEPS, LR = 240, 5, 3, 24, 60, 0.5
TOLERANCE = 0.03  # nats: each mode's full-data loss against serial SGD's (seen: ≤ 0.011)
MODES = {"sync": (SyncParameterServer, {}), "locked": (LockedParameterServer, {}),
         "async": (AsyncParameterServer, {}),
         "async n_push 2, n_fetch 3": (AsyncParameterServer, {"n_push": 2, "n_fetch": 3}),
         "ssp τ=2": (SSPParameterServer, {"staleness": 2}),
         "sync then async": (SyncThenAsync, {"warmup": 10})}


def problem():
    """N points in D dimensions, labels drawn from a softmax of a random linear model."""
    gen = np.random.default_rng(11)
    x = gen.standard_normal((N, D))
    logits = x @ gen.standard_normal((D, C))
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = np.array([gen.choice(C, p=row) for row in p])
    return x, y


def loss_of(w, b, x, y) -> float:
    z = x @ w + b  # (N, C)
    z = z - z.max(1, keepdims=True)
    return float(np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(len(y)), y]))


def optimum(x, y) -> float:
    """L*: full-batch gradient descent to convergence (the loss is convex, smooth)."""
    w, b = np.zeros((D, C)), np.zeros(C)
    for _ in range(3000):
        z = x @ w + b
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        p[np.arange(len(y)), y] -= 1.0  # ∂L/∂z · N
        w, b = w - 1.0 * x.T @ p / len(y), b - 1.0 * p.mean(0)
    return loss_of(w, b, x, y)


def task() -> Task:
    return Task(None, nn.MLP([D, C], np.random.default_rng(3), np.float64), "sample")


def batches(x, y):
    gen = np.random.default_rng(5)
    for _ in range(STEPS):
        rows = gen.choice(N, BATCH, replace=False)
        yield on_device(x[rows], np.float64), on_device(y[rows])


def final_loss(params, x, y) -> float:
    weight, bias = (host(p) for p in params)
    return loss_of(weight, bias, x, y)


@pytest.fixture(scope="module")
def serial():
    x, y = problem()
    one = task()
    single = SingleDevice(one.model, SGD(one.model.parameters(), LR), one.loss)
    for batch in batches(x, y):
        single.step(batch)
    return final_loss([p.data for p in one.model.parameters()], x, y), optimum(x, y)


@pytest.mark.parametrize("mode", list(MODES))
@shared_verdict
def test_every_mode_reaches_serial_sgds_loss_on_logistic_regression(comm, serial, mode):
    if comm.size < 2:
        pytest.skip("a parameter server needs a server and a worker")
    x, y = problem()
    mine = task()
    cls, knobs = MODES[mode]
    ps = cls(mine.model, lambda params: SGD(params, LR), mine.loss, mine.count, comm, **knobs)
    for batch in batches(x, y):
        ps.step(batch)
    if hasattr(ps, "shutdown"):
        ps.shutdown()
    state = ps.state_dict()
    ps.close()
    if state is None:
        return
    got = final_loss(list(state["model"].values()), x, y)
    serial_loss, best = serial
    assert serial_loss - best < 0.05, (serial_loss, best)  # SGD itself is near the optimum
    assert abs(got - serial_loss) < TOLERANCE, \
        f"{mode}: {got:.4f} against serial {serial_loss:.4f} (optimum {best:.4f})"
