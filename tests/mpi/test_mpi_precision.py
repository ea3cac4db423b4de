"""Data parallelism in 16 bits moves the fp32 masters as one device in 16 bits does, within the
format's rounding; every replica holds the same masters and the same loss scale, overflows
included (every rank judges the reduced gradient)."""

import functools

import numpy as np
import pipeline_helpers as pipelined
import pytest
from device_helpers import host
from dp_helpers import make_batch, make_task
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict
from precision_helpers import assert_moved_alike, available, fp32_start, masters, mixed

from scratchpar import backend
from scratchpar.autograd.precision import dtype_of
from scratchpar.comm.mesh import Mesh
from scratchpar.optim import SGD
from scratchpar.optim.mixed import MixedPrecision
from scratchpar.optim.scaler import LossScaler
from scratchpar.parallel import (
    DataParallel,
    DataParallelNaive,
    Hogwild,
    Hybrid,
    LocalSGD,
    SingleDevice,
)
from scratchpar.parallel.pipeline import partition, schedules
from scratchpar.parallel.pipeline.partition import parameter_counts
from scratchpar.parallel.ps import AsyncParameterServer, SyncParameterServer
from scratchpar.parallel.zero import STAGES
from scratchpar.train.precision import AtPrecision
from scratchpar.train.stored import Stored

STRATEGIES = {"dp": DataParallel, "dp-naive": DataParallelNaive,
              **{f"zero{stage}": cls for stage, cls in STAGES.items()},
              "zero3-offload": functools.partial(STAGES[3], offload=True)}


@pytest.mark.parametrize("name", STRATEGIES)
@settings(max_examples=4)
@given(kind=st.sampled_from(("mlp", "gpt", "lstm")), rows=st.integers(0, 9),
       precision=st.sampled_from(("fp16", "bf16")), seed=st.integers(0, 2**31))
@shared_verdict
def test_three_steps_move_the_masters_as_one_device(comm, mesh, name, kind, rows, precision,
                                                    seed):
    precision = available(precision)
    mine, one = make_task(kind, seed + comm.rank, np.float32), make_task(kind, seed, np.float32)
    dp = STRATEGIES[name](mine.model, mixed(mine, precision, 2.0**8), mine, mesh)
    single = SingleDevice(one.model, mixed(one, precision, 2.0**8), one)
    start = [host(p.data).astype(np.float64) for p in one.model.parameters()]
    for step in range(3):
        batch = make_batch(kind, rows + 1, seed + step, np.float32)
        got, want = dp.step(batch), single.step(batch)
        assert not got["skipped"] and not want["skipped"]
    assert_moved_alike(masters(dp), masters(single), start, precision)
    digests = comm.allgather_obj([m.tobytes() for m in masters(dp)])
    assert all(d == digests[0] for d in digests)


@pytest.mark.parametrize("cls", [DataParallel, functools.partial(LocalSGD, every=2)])
@settings(max_examples=3)
@given(kind=st.sampled_from(("mlp", "gpt")), seed=st.integers(0, 2**31))
@shared_verdict
def test_every_replica_skips_an_overflow_and_halves_its_scale_alike(comm, mesh, cls, kind,
                                                                     seed):
    """A scale of 2⁴⁰ overflows fp16 at once: the ranks halve it together, step after step,
    until the gradient fits, and hold the same masters and scale throughout (local SGD's
    replicas judge the step together too, and meet at each average)."""
    task = make_task(kind, seed + comm.rank, np.float32)
    strategy = cls(task.model, mixed(task, "fp16", 2.0**40), task, mesh)
    seen = []
    with np.errstate(over="ignore", invalid="ignore"):  # the overflows are the point
        for step in range(40):
            metrics = strategy.step(make_batch(kind, 4, seed + step, np.float32))
            seen.append((bool(metrics.get("overflow")), strategy.optimizer.grad_scale))
    strategy.finish()
    assert seen[0] == (True, 2.0**39)  # it overflowed,
    assert any(not overflowed for overflowed, _ in seen)  # then found its level
    weights = [host(w).tobytes() for w in strategy.optimizer.weights()]
    views = comm.allgather_obj((seen, weights))
    assert all(v == views[0] for v in views)


@pytest.mark.parametrize("cls", [DataParallel, DataParallelNaive])
@settings(max_examples=3)
@given(kind=st.sampled_from(("mlp", "gpt", "lstm")), precision=st.sampled_from(("fp16", "bf16")),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_gradients_summed_in_fp32_move_the_masters_as_one_device(comm, mesh, cls, kind,
                                                                  precision, seed):
    """``reduce_dtype=fp32``: the 16-bit gradients are summed over ranks in fp32 and stay so
    for the update; the masters move as one device's."""
    precision = available(precision)
    mine, one = make_task(kind, seed + comm.rank, np.float32), make_task(kind, seed, np.float32)
    dp = cls(mine.model, mixed(mine, precision, 2.0**8), mine, mesh, reduce_dtype=np.float32)
    single = SingleDevice(one.model, mixed(one, precision, 2.0**8), one)
    start = [host(p.data).astype(np.float64) for p in one.model.parameters()]
    for step in range(3):
        batch = make_batch(kind, 5, seed + step, np.float32)
        dp.step(batch)
        single.step(batch)
        assert all(p.grad.dtype == np.float32 for p in mine.model.parameters())
    assert_moved_alike(masters(dp), masters(single), start, precision)


@pytest.mark.parametrize("name", STRATEGIES)
@settings(max_examples=2)
@given(kind=st.sampled_from(("mlp", "gpt")), precision=st.sampled_from(("fp16", "bf16")),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_a_checkpoint_of_masters_resumes_bitwise(comm, mesh, name, kind, precision, seed):
    """Two steps, the state folded as a checkpoint holds it (the masters as the weights), a
    fresh strategy unfolds it, one more step: the masters equal three uninterrupted steps'."""
    precision = available(precision)
    names = [n for n, _ in make_task(kind, seed).model.named_parameters()]

    def build():
        task = make_task(kind, seed + comm.rank, np.float32)
        return task, STRATEGIES[name](task.model, mixed(task, precision, 2.0**8), task, mesh)

    batches = [make_batch(kind, 5, seed + step, np.float32) for step in range(3)]
    (_, straight), (first_task, first) = build(), build()
    for batch in batches:
        straight.step(batch)
    for batch in batches[:2]:
        first.step(batch)
    rank_0s = comm.allgather_obj(first.state_dict())[0]
    saved = AtPrecision(Stored.of(rank_0s), names, sixteen=False).state()
    assert not any(k.startswith("master.") for k in saved["optim"])
    task, second = build()
    second.load_state_dict(AtPrecision(Stored.of(saved), names, sixteen=True).state())
    if task.scaler is not None:
        task.scaler.load_state_dict(first_task.scaler.state_dict())
    second.step(batches[2])
    for got, want in zip(masters(second), masters(straight)):
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "zb-h1"])
@settings(max_examples=2)
@given(kind=st.sampled_from(("mlp", "gpt")), precision=st.sampled_from(("fp16", "bf16")),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_a_pipeline_in_16_bits_moves_the_masters_as_one_device(comm, schedule, kind, precision,
                                                               seed):
    """Every rank a stage, each stage's optimizer the run's wrapper rebound to its parameters
    (one loss scale, judged on the norm over every stage): three steps of two micro-batches
    move the masters, gathered on rank 0, as one device's."""
    precision = available(precision)
    mine, one = pipelined.make_task(kind, seed, np.float32), pipelined.make_task(kind, seed,
                                                                                   np.float32)
    pipe = pipelined.make_pipeline(comm, mine, schedule, comm.size, 2,
                                   optimizer=mixed(mine, precision, 2.0**8))
    single = SingleDevice(one.model, mixed(one, precision, 2.0**8), one)
    start = [host(p.data).astype(np.float64) for p in one.model.parameters()]
    for step in range(3):
        batch = pipelined.make_batch(kind, 4, seed + step, np.float32)
        got, want = pipe.step(batch), single.step(batch)
        assert not got["skipped"] and not want["skipped"]
    assert_moved_alike(masters(pipe), masters(single), start, precision)  # on every rank


@settings(max_examples=2)
@given(kind=st.sampled_from(("mlp", "gpt")), seed=st.integers(0, 2**31))
@shared_verdict
def test_pipedream_in_bf16_moves_its_masters_as_in_fp32(comm, kind, seed):
    """PipeDream updates each stage after every micro-batch on the weights its forward
    stashed; in bf16 (no loss scale to part) its fp32 masters move, over three steps of two
    micro-batches, as the same run's fp32 weights from the same bf16 start, within bf16's
    tolerance."""
    if backend.xp_default() is not np:
        pytest.skip("bf16 needs NumPy's bfloat16")
    low, full = (pipelined.make_task(kind, seed, np.float32) for _ in range(2))
    optimizer = mixed(low, "bf16", 1.0)  # SGD with momentum, as the fp32 run's
    start = fp32_start(low, full)
    names = [name for name, _ in full.model.named_parameters()]
    moved = []
    for task, make in ((low, optimizer), (full, None)):  # make_pipeline frees the last one
        pipe = pipelined.make_pipeline(comm, task, "pipedream", comm.size, 2, optimizer=make)
        for step in range(3):
            batch = pipelined.make_batch(kind, 4, seed + step, np.float32)
            assert not pipe.step(batch)["skipped"]
        state = pipe.state_dict()  # gathered on rank 0: a collective
        if comm.rank == 0:
            weights = [state["optim"][f"master.{i}"] for i in range(len(names))] if make \
                else [state["model"][n] for n in names]
            moved.append([host(w).astype(np.float64) for w in weights])
    if comm.rank == 0:
        assert_moved_alike(moved[0], moved[1], start, "bf16")


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
       sequence_parallel=st.booleans(), seed=st.integers(0, 2**31))
@shared_verdict
def test_tensor_parallel_stages_in_16_bits_move_the_masters_as_one_device(
        comm, kind, precision, sequence_parallel, seed):
    """tp 2 where the world is even, the rest stages: the vocabulary-parallel loss carries
    the scale into backward as the task's does, so three steps move the masters, gathered on
    rank 0, as one device's."""
    precision = available(precision)
    tp = 2 if comm.size % 2 == 0 else 1
    mine, one = (pipelined.make_task(kind, seed, np.float32, depth=max(3, comm.size // tp))
                 for _ in range(2))
    mesh = Mesh(comm, dp=1, pp=comm.size // tp, tp=tp)
    ranges = partition(parameter_counts(mine.model.pipeline_layers()), mesh.pp)
    pipe = Hybrid(mine.model, mixed(mine, precision, 2.0**8), mine, mesh,
                  schedule=schedules.build("1f1b", mesh.pp, 2, 1), ranges=ranges,
                  sequence_parallel=sequence_parallel and kind == "gpt")
    single = SingleDevice(one.model, mixed(one, precision, 2.0**8), one)
    start = [host(p.data).astype(np.float64) for p in one.model.parameters()]
    try:
        for step in range(3):
            batch = pipelined.make_batch(kind, 4, seed + step, np.float32)
            got, want = pipe.step(batch), single.step(batch)
            assert not got["skipped"] and not want["skipped"]
        assert_moved_alike(masters(pipe), masters(single), start, precision)  # on every rank
    finally:
        pipe.close()
        mesh.free()


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
