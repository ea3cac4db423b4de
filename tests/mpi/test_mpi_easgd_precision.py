"""Elastic averaging in 16 bits: the elastic moves act on the workers' fp32 masters and an fp32
centre. Round-robin equals its sequential emulation bit for bit (one asynchronous worker is
synchronous EASGD on one rank in 16 bits too: test_mpi_easgd_async.py); the synchronous centre
moves as fp32's does within the format's rounding; an overflow halves a worker's loss scale
and is not divergence on any rank; and a checkpoint's weights are the centre, from which every
worker resumes bit for bit."""

import numpy as np
import pytest
from device_helpers import host, on_device
from dp_helpers import make_batch, make_task, mean_backward
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict
from precision_helpers import assert_moved_alike, available, fp32_start, mixed

from scratchpar.optim import SGD, guarded_step
from scratchpar.parallel.easgd import AsyncEASGD, RoundRobinEASGD, SyncEASGD
from scratchpar.train.precision import AtPrecision
from scratchpar.train.stored import Stored

LR, RHO, STEPS = 0.1, 0.7, 5  # mixed() steps SGD with momentum at LR


def emulate_round_robin(kind: str, seed: int, workers: int, precision: str):
    """Round-robin on one process in 16 bits: G workers, each moving its fp32 masters by
    eq. 3 and rounding them into its model, and the fp32 centre by eq. 4."""
    tasks = [make_task(kind, seed, np.float32) for _ in range(workers)]
    optims = [mixed(task, precision, 2.0**8)(task.model.parameters()) for task in tasks]
    centre = [host(p.data).astype(np.float32) for p in tasks[0].model.parameters()]
    alpha = LR * RHO
    for t in range(STEPS):
        task, optim = tasks[t % workers], optims[t % workers]
        optim.zero_grad()
        loss = mean_backward(task, make_batch(kind, 4, seed + t, np.float32))
        weights = optim.weights()
        before = [host(w).copy() for w in weights]  # Wᵗʲ
        for w, c in zip(weights, centre):
            w -= alpha * (w - on_device(c))  # eq. 3's elastic term
        optim.round_params()
        assert not guarded_step(optim, task.model.parameters(), loss)["skipped"]
        for c, w in zip(centre, before):
            c += alpha * (w - c)  # eq. 4
    return centre, optims


@settings(max_examples=3)
@given(kind=st.sampled_from(("mlp", "gpt")), precision=st.sampled_from(("fp16", "bf16")),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_round_robin_in_16_bits_equals_its_sequential_emulation_bitwise(comm, mesh, kind,
                                                                         precision, seed):
    if comm.size < 2:
        pytest.skip("round-robin EASGD needs a master and a worker")
    precision = available(precision)
    task = make_task(kind, seed, np.float32)
    strategy = RoundRobinEASGD(task.model, mixed(task, precision, 2.0**8), task, mesh, rho=RHO)
    for t in range(STEPS):
        assert not strategy.step(make_batch(kind, 4, seed + t, np.float32))["skipped"]
    strategy.close()
    centre, optims = emulate_round_robin(kind, seed, comm.size - 1, precision)
    if comm.rank == 0:
        assert all(c.dtype == np.float32 for c in strategy.centre)
        for got, want in zip(strategy.centre, centre):
            assert got.tobytes() == want.tobytes()
        return
    want = optims[comm.rank - 1]
    for got, wanted in zip(strategy.optimizer.weights(), want.weights()):
        assert host(got).tobytes() == host(wanted).tobytes()
    for p, q in zip(task.model.parameters(), want.params):
        assert host(p.data).tobytes() == host(q.data).tobytes()


@settings(max_examples=3)
@given(kind=st.sampled_from(("mlp", "gpt")), precision=st.sampled_from(("fp16", "bf16")),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_the_synchronous_centre_moves_as_fp32s_within_the_formats_rounding(comm, mesh, kind,
                                                                          precision, seed):
    """The same 16-bit starting weights, stepped in 16 bits and in fp32: the fp32 centres move
    alike, every rank holds the same one, and each worker's model is its masters rounded."""
    precision = available(precision)
    low, full = make_task(kind, seed, np.float32), make_task(kind, seed, np.float32)
    strategy = SyncEASGD(low.model, mixed(low, precision, 2.0**8), low, mesh, rho=RHO, tau=1)
    start = fp32_start(low, full)
    spec = SyncEASGD(full.model, lambda params: SGD(params, LR, momentum=0.9), full, mesh,
                     rho=RHO, tau=1)
    for step in range(3):
        batch = make_batch(kind, 2 * comm.size, seed + step, np.float32)
        assert not strategy.step(batch)["skipped"] and not spec.step(batch)["skipped"]
    got = [host(c).astype(np.float64) for c in strategy.centre]
    assert all(c.dtype == np.float32 for c in strategy.centre)
    assert_moved_alike(got, [host(c).astype(np.float64) for c in spec.centre], start, precision)
    assert len({b"".join(c.tobytes() for c in g) for g in comm.allgather_obj(got)}) == 1
    for p, master in zip(low.model.parameters(), strategy.optimizer.weights()):
        assert host(p.data).tobytes() == host(master).astype(p.data.dtype).tobytes()


def build(mode: str, mesh, task, precision: str, scale: float):
    args = (task.model, mixed(task, precision, scale), task, mesh)
    if mode == "sync":
        return SyncEASGD(*args, rho=RHO, tau=2)
    if mode == "async":
        return AsyncEASGD(*args, rho=RHO, tau=2)
    return RoundRobinEASGD(*args, rho=RHO)


@pytest.mark.parametrize("mode", ["sync", "async", "round-robin"])
@shared_verdict
def test_an_overflow_halves_the_scale_and_is_not_divergence(comm, mesh, mode):
    """A scale of 2²⁰ overflows fp16 at once (its largest value is about 2¹⁶): each worker
    halves its scale and skips until the gradient fits; every rank's metrics (the master's,
    which the loop on rank 0 reads, included) call those steps overflows, and the rest are
    applied."""
    if comm.size < 2 and mode != "sync":
        pytest.skip("a master mode needs a master and a worker")
    strategy = build(mode, mesh, make_task("mlp", 5, np.float32), "fp16", 2.0**20)
    seen = []
    with np.errstate(over="ignore", invalid="ignore"):  # the overflows are the point
        for step in range(60):
            metrics = strategy.step(make_batch("mlp", 2 * comm.size, step, np.float32))
            seen.append((bool(metrics["skipped"]), bool(metrics.get("overflow"))))
    strategy.shutdown()
    strategy.close()
    assert (True, True) in seen and (False, False) in seen, str(seen)
    assert all(overflow for skipped, overflow in seen if skipped), str(seen)


@pytest.mark.parametrize("mode", ["sync", "round-robin"])  # async: exchanges in arrival order
@shared_verdict
def test_a_checkpoint_holds_the_centre_and_resumes_every_worker_bitwise(comm, mesh, mode):
    """Folded as the loop saves it, the checkpoint's weights are the fp32 centre (not the
    first worker's masters); unfolded into fresh workers, the run goes on as if unbroken."""
    if comm.size < 2:
        pytest.skip("one worker has no elastic partner")
    names = [n for n, _ in make_task("mlp", 4).model.named_parameters()]
    batches = [make_batch("mlp", 3 * comm.size, step, np.float32) for step in range(6)]
    whole, first = (build(mode, mesh, make_task("mlp", 4, np.float32), "fp16", 2.0**8)
                    for _ in range(2))
    for batch in batches:
        whole.step(batch)
    for batch in batches[:3]:
        first.step(batch)
    saved = first.state_dict()
    if saved is not None:
        saved = AtPrecision(Stored.of(saved), names, sixteen=False).state()
        for name, c in zip(names, first.centre):
            assert host(saved["model"][name]).tobytes() == host(c).tobytes()
    saved = comm.allgather_obj(saved, "EASGD checkpoint")[0]
    resumed = build(mode, mesh, make_task("mlp", 9, np.float32), "fp16", 2.0**8)
    resumed.load_state_dict(AtPrecision(Stored.of(saved), names, sixteen=True).state())
    for batch in batches[3:]:
        resumed.step(batch)
    for strategy in (whole, first, resumed):
        strategy.shutdown()
        strategy.close()
    if comm.rank >= resumed.first:
        for got, want in zip(resumed.optimizer.weights(), whole.optimizer.weights()):
            assert host(got).tobytes() == host(want).tobytes()
    if comm.rank == 0:
        for c, d in zip(resumed.centre, whole.centre):
            assert host(c).tobytes() == host(d).tobytes()
