"""The families whose workers step apart, in 16 bits: a parameter server steps its fp32
ranges, local SGD averages the fp32 masters and a Hogwild worker moves θ as one device in 16
bits does, within the format's rounding; a server's overflows are the loss scale's, not
divergence."""

import numpy as np
import pytest
from device_helpers import host
from dp_helpers import make_batch, make_task
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict
from precision_helpers import assert_moved_alike, available, masters, mixed

from scratchpar import backend
from scratchpar.autograd.precision import dtype_of
from scratchpar.comm.mesh import Mesh
from scratchpar.optim import SGD
from scratchpar.optim.mixed import MixedPrecision
from scratchpar.optim.scaler import LossScaler
from scratchpar.parallel import (
    Hogwild,
    LocalSGD,
    SingleDevice,
)
from scratchpar.parallel.ps import AsyncParameterServer, SyncParameterServer


def servers_of(comm, mesh, task, precision: str, scale: float, mode: str = "sync"):
    """A parameter server of one server rank over ``task``'s model in 16 bits, given the
    mixed-precision factory every strategy takes: the server's fp32 range is the master its
    rule steps, the workers push fp32 gradients unscaled by ``scale``."""
    if comm.size < 2:
        pytest.skip("a parameter server needs a server and a worker")
    cls = SyncParameterServer if mode == "sync" else AsyncParameterServer
    return cls(task.model, mixed(task, precision, scale), task, mesh)


@settings(max_examples=3)
@given(kind=st.sampled_from(("mlp", "gpt")), precision=st.sampled_from(("fp16", "bf16")),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_a_parameter_server_in_16_bits_moves_its_fp32_ranges_as_one_device(comm, mesh, kind,
                                                                            precision, seed):
    """Synchronous, one server: three steps move the server's fp32 range, the workers'
    master, as one device's masters move in the same precision; every worker's 16-bit model
    is that master rounded."""
    precision = available(precision)
    mine, one = make_task(kind, seed, np.float32), make_task(kind, seed, np.float32)
    ps = servers_of(comm, mesh, mine, precision, 2.0**8)
    single = SingleDevice(one.model, mixed(one, precision, 2.0**8), one)
    start = [host(p.data).astype(np.float64) for p in one.model.parameters()]
    try:
        for step in range(3):
            batch = make_batch(kind, ps.workers + 2, seed + step, np.float32)
            got, want = ps.step(batch), single.step(batch)
            assert not got["skipped"] and not want["skipped"]
        state = ps.state_dict()
        if comm.rank == 0:
            got = [host(v).astype(np.float64) for v in state["model"].values()]
            assert all(v.dtype == np.float32 for v in state["model"].values())
            assert_moved_alike(got, masters(single), start, precision)
        views = comm.allgather_obj(None if ps.is_server else
                                   [host(p.data).tobytes() for p in mine.model.parameters()])
        assert len({tuple(v) for v in views if v is not None}) == 1  # every worker alike
    finally:
        ps.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
@settings(max_examples=2)
@given(kind=st.sampled_from(("mlp", "gpt")), seed=st.integers(0, 2**31))
@shared_verdict
def test_a_parameter_servers_overflows_are_the_scales_not_divergence(comm, mesh, mode, kind,
                                                                     seed):
    """A scale of 2³⁰ overflows fp16 at once: each worker halves its scale and skips its push
    until the gradient fits (and again whenever a step's gradient outgrows it); every rank's
    metrics call those steps overflows (the server's too, which the loop on rank 0 reads),
    and the others are applied."""
    ps = servers_of(comm, mesh, make_task(kind, seed, np.float32), "fp16", 2.0**30, mode)
    seen = []
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # the overflows are the point
            for step in range(30):
                metrics = ps.step(make_batch(kind, 2 * ps.workers, seed + step, np.float32))
                seen.append((bool(metrics["skipped"]), bool(metrics.get("overflow"))))
        ps.shutdown()  # the asynchronous workers leave, the servers see them go
    finally:
        ps.close()
    assert seen[0] == (True, True) and (False, False) in seen, str(seen)
    assert all(overflow for skipped, overflow in seen if skipped), str(seen)


@settings(max_examples=3)
@given(kind=st.sampled_from(("mlp", "gpt")), precision=st.sampled_from(("fp16", "bf16")),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_local_sgd_in_16_bits_averages_the_fp32_masters(comm, mesh, kind, precision, seed):
    """Two local steps on each rank's own rows, then the average: every replica holds the
    same fp32 masters, the mean of the replicas' masters, and its 16-bit model is that mean
    rounded."""
    precision = available(precision)
    task = make_task(kind, seed + comm.rank, np.float32)
    local = LocalSGD(task.model, mixed(task, precision, 2.0**8), task, mesh, every=0)
    for step in range(2):
        local.step(make_batch(kind, 2 * comm.size, seed + step, np.float32))
    before = comm.allgather_obj([host(s["master"]) for s in local.optimizer.state])
    local.finish()
    after = [host(s["master"]) for s in local.optimizer.state]
    for i, master in enumerate(after):
        mean = sum(replica[i].astype(np.float64) for replica in before) / comm.size
        np.testing.assert_allclose(master, mean, rtol=1e-6, atol=1e-7)
    assert len({b"".join(m.tobytes() for m in got) for got in comm.allgather_obj(after)}) == 1
    for p, master in zip(task.model.parameters(), after):
        held = host(p.data)
        assert held.tobytes() == master.astype(held.dtype).tobytes()


@settings(max_examples=3)
@given(kind=st.sampled_from(("mlp", "gpt")), precision=st.sampled_from(("fp16", "bf16")),
       window=st.sampled_from(("shared", "one-sided")), seed=st.integers(0, 2**31))
@shared_verdict
def test_one_hogwild_worker_in_16_bits_moves_theta_as_one_device(comm, kind, precision,
                                                                 window, seed):
    """Each rank a Hogwild of its own: θ, fp32 in the window, moves as one device's masters
    under plain SGD in the same precision (the step's γ·g/S against η·(g/S): the same to
    fp32's rounding)."""
    precision = available(precision)
    alone = comm.split(comm.rank, name="alone")
    mine, one = make_task(kind, seed, np.float32), make_task(kind, seed, np.float32)
    for task in (mine, one):
        task.model.to_dtype(dtype_of(precision, backend.xp_default()))
        task.scaler = LossScaler(scale=2.0**8) if precision == "fp16" else None
    mesh = Mesh(alone)
    hogwild = Hogwild(mine.model, lambda params: MixedPrecision(SGD(params, 0.3), mine.scaler),
                      mine, mesh, window=window)
    single = SingleDevice(one.model, lambda params: MixedPrecision(SGD(params, 0.3), one.scaler),
                          one)
    start = [host(p.data).astype(np.float64) for p in one.model.parameters()]
    try:
        for step in range(3):
            batch = make_batch(kind, 5, seed + step, np.float32)
            assert not hogwild.step(batch)["skipped"] and not single.step(batch)["skipped"]
        got = hogwild.values()
    finally:
        hogwild.close()
        mesh.free()
        alone.free()
    assert all(g.dtype == np.float32 for g in got)
    assert_moved_alike([g.astype(np.float64) for g in got], masters(single), start, precision)
