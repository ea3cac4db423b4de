"""Round-robin EASGD (a master serving worker t mod G at step t) on real ranks equals its
sequential emulation on one process, bit for bit in float64: the master's centre and every
worker's weights."""

import numpy as np
import pytest
from device_helpers import host, on_device
from dp_helpers import make_batch, make_task, mean_backward
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.optim import SGD, guarded_step
from scratchpar.parallel.easgd import RoundRobinEASGD

LR, STEPS = 0.1, 7


def emulate(kind: str, seed: int, workers: int, rho: float, momentum: float):
    """Round-robin on one process: G workers' models and optimizers, the centre beside them."""
    tasks = [make_task(kind, seed) for _ in range(workers)]
    optims = [SGD(t.model.parameters(), LR, momentum=momentum) for t in tasks]
    centre = [host(p.data).copy() for p in tasks[0].model.parameters()]
    alpha = LR * rho
    for t in range(STEPS):
        j = t % workers
        task, params = tasks[j], tasks[j].model.parameters()
        optims[j].zero_grad()
        loss = mean_backward(task, make_batch(kind, 4, seed + t))
        before = [host(p.data).copy() for p in params]  # Wᵗʲ
        for p, c in zip(params, centre):
            p.data -= alpha * (p.data - on_device(c))  # eq. 3's elastic term
        guarded_step(optims[j], params, loss)
        for c, w in zip(centre, before):
            c += alpha * (w - c)  # eq. 4
    return centre, [[host(p.data) for p in t.model.parameters()] for t in tasks]


@settings(max_examples=6)
@given(kind=st.sampled_from(("mlp", "gpt")), rho=st.floats(0.0, 2.0),
       momentum=st.sampled_from((0.0, 0.9)), seed=st.integers(0, 2**31))
@shared_verdict
def test_round_robin_equals_its_sequential_emulation_bitwise(comm, mesh, kind, rho, momentum,
                                                             seed):
    if comm.size < 2:
        pytest.skip("round-robin EASGD needs a master and a worker")
    task = make_task(kind, seed)
    strategy = RoundRobinEASGD(task.model, lambda params: SGD(params, LR, momentum=momentum),
                               task, mesh, rho=rho)
    for t in range(STEPS):
        strategy.step(make_batch(kind, 4, seed + t))
    strategy.close()
    centre, workers = emulate(kind, seed, comm.size - 1, rho, momentum)
    if comm.rank == 0:
        for got, want in zip(strategy.centre, centre):
            assert np.array_equal(got, want)
    else:
        for p, want in zip(task.model.parameters(), workers[comm.rank - 1]):
            assert np.array_equal(host(p.data), want)
