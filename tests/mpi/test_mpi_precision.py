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
from scratchpar.comm.mesh import Mesh
from scratchpar.parallel import (
    DataParallel,
    DataParallelNaive,
    Hybrid,
    LocalSGD,
    SingleDevice,
)
from scratchpar.parallel.pipeline import partition, schedules
from scratchpar.parallel.pipeline.partition import parameter_counts
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
