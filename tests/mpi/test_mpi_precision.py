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

from scratchpar import backend
from scratchpar.autograd.precision import dtype_of
from scratchpar.optim import SGD
from scratchpar.optim.mixed import MixedPrecision
from scratchpar.optim.scaler import LossScaler
from scratchpar.parallel import DataParallel, DataParallelNaive, SingleDevice
from scratchpar.parallel.zero import STAGES
from scratchpar.train.precision import fold_masters, unfold_masters

# Norm-wise relative error of the masters' moves: a few units of each format's rounding
# (fp16 2⁻¹¹, bf16 2⁻⁸), summed over a backward's products and three steps.
TOLERANCE = {"fp16": 2e-2, "bf16": 1e-1}


def mixed(task, precision: str, scale: float):
    """``task``'s model in 16 bits, stepped by SGD with momentum through fp32 masters."""
    task.model.to_dtype(dtype_of(precision, backend.xp_default()))
    task.scaler = LossScaler(scale=scale) if precision == "fp16" else None
    return MixedPrecision(SGD(task.model.parameters(), lr=0.1, momentum=0.9), task.scaler)


def masters(strategy):
    """Each parameter's fp32 master, whole, in the one-device model's order (a sharded
    strategy gathers them: its checkpoint's layout-free state)."""
    optim = strategy.state_dict()["optim"]
    count = sum(key.startswith("master.") for key in optim)
    return [host(optim[f"master.{i}"]).astype(np.float64) for i in range(count)]


def assert_moved_alike(got, want, start, precision: str) -> None:
    """The masters ``got`` moved from ``start`` as ``want`` did, within ``TOLERANCE``
    norm-wise, a master for every parameter."""
    moved = [m - s for m, s in zip(got, start)]
    wanted = [m - s for m, s in zip(want, start)]
    assert len(moved) == len(wanted) == len(start)
    error = np.sqrt(sum(np.sum((a - b) ** 2) for a, b in zip(moved, wanted)))
    assert error <= TOLERANCE[precision] * np.sqrt(sum(np.sum(b**2) for b in wanted)), error


def available(precision: str) -> str:
    """``precision``, or fp16 where the device has no bfloat16 (CuPy, and the double)."""
    return precision if backend.xp_default() is np else "fp16"


STRATEGIES = {"dp": DataParallel, "dp-naive": DataParallelNaive,
              **{f"zero{stage}": cls for stage, cls in STAGES.items()},
              "zero3-offload": functools.partial(STAGES[3], offload=True)}


@pytest.mark.parametrize("name", STRATEGIES)
@settings(max_examples=4)
@given(kind=st.sampled_from(("mlp", "gpt", "lstm")), rows=st.integers(0, 9),
       precision=st.sampled_from(("fp16", "bf16")), seed=st.integers(0, 2**31))
@shared_verdict
def test_three_steps_move_the_masters_as_one_device(comm, name, kind, rows, precision, seed):
    precision = available(precision)
    mine, one = make_task(kind, seed + comm.rank, np.float32), make_task(kind, seed, np.float32)
    dp = STRATEGIES[name](mine.model, mixed(mine, precision, 2.0**8), mine.loss, mine.count,
                          comm)
    single = SingleDevice(one.model, mixed(one, precision, 2.0**8),
                          lambda m, b: one.loss(m, b, "mean"))
    start = [host(p.data).astype(np.float64) for p in one.model.parameters()]
    for step in range(3):
        batch = make_batch(kind, rows + 1, seed + step, np.float32)
        got, want = dp.step(batch), single.step(batch)
        assert not got["skipped"] and not want["skipped"]
    assert_moved_alike(masters(dp), masters(single), start, precision)
    digests = comm.allgather_obj([m.tobytes() for m in masters(dp)])
    assert all(d == digests[0] for d in digests)


@settings(max_examples=3)
@given(kind=st.sampled_from(("mlp", "gpt")), seed=st.integers(0, 2**31))
@shared_verdict
def test_every_replica_skips_an_overflow_and_halves_its_scale_alike(comm, kind, seed):
    """A scale of 2⁴⁰ overflows fp16 at once: the ranks halve it together, step after step,
    until the gradient fits, and hold the same masters and scale throughout."""
    task = make_task(kind, seed + comm.rank, np.float32)
    dp = DataParallel(task.model, mixed(task, "fp16", 2.0**40), task.loss, task.count, comm)
    seen = []
    with np.errstate(over="ignore", invalid="ignore"):  # the overflows are the point
        for step in range(30):
            metrics = dp.step(make_batch(kind, 4, seed + step, np.float32))
            seen.append((bool(metrics.get("overflow")), dp.optimizer.grad_scale))
    assert seen[0] == (True, 2.0**39) and not seen[-1][0]  # it overflowed, then found its level
    views = comm.allgather_obj((seen, [m.tobytes() for m in masters(dp)]))
    assert all(v == views[0] for v in views)


@pytest.mark.parametrize("cls", [DataParallel, DataParallelNaive])
@settings(max_examples=3)
@given(kind=st.sampled_from(("mlp", "gpt", "lstm")), precision=st.sampled_from(("fp16", "bf16")),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_gradients_summed_in_fp32_move_the_masters_as_one_device(comm, cls, kind, precision,
                                                                  seed):
    """``reduce_dtype=fp32``: the 16-bit gradients are summed over ranks in fp32 and stay so
    for the update; the masters move as one device's."""
    precision = available(precision)
    mine, one = make_task(kind, seed + comm.rank, np.float32), make_task(kind, seed, np.float32)
    dp = cls(mine.model, mixed(mine, precision, 2.0**8), mine.loss, mine.count, comm,
             reduce_dtype=np.float32)
    single = SingleDevice(one.model, mixed(one, precision, 2.0**8),
                          lambda m, b: one.loss(m, b, "mean"))
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
def test_a_checkpoint_of_masters_resumes_bitwise(comm, name, kind, precision, seed):
    """Two steps, the state folded as a checkpoint holds it (the masters as the weights), a
    fresh strategy unfolds it, one more step: the masters equal three uninterrupted steps'."""
    precision = available(precision)
    names = [n for n, _ in make_task(kind, seed).model.named_parameters()]

    def build():
        task = make_task(kind, seed + comm.rank, np.float32)
        return task, STRATEGIES[name](task.model, mixed(task, precision, 2.0**8), task.loss,
                                      task.count, comm)

    batches = [make_batch(kind, 5, seed + step, np.float32) for step in range(3)]
    (_, straight), (first_task, first) = build(), build()
    for batch in batches:
        straight.step(batch)
    for batch in batches[:2]:
        first.step(batch)
    saved = fold_masters(first.state_dict(), names)
    assert not any(k.startswith("master.") for k in saved["optim"])
    task, second = build()
    second.load_state_dict(unfold_masters(saved, names))
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
                                   optimizer=mixed(mine, precision, 2.0**8).rebind)
    single = SingleDevice(one.model, mixed(one, precision, 2.0**8),
                          lambda m, b: one.loss(m, b, "mean"))
    start = [host(p.data).astype(np.float64) for p in one.model.parameters()]
    for step in range(3):
        batch = pipelined.make_batch(kind, 4, seed + step, np.float32)
        got, want = pipe.step(batch), single.step(batch)
        assert not got["skipped"] and not want["skipped"]
    if comm.rank == 0:
        assert_moved_alike(masters(pipe), masters(single), start, precision)
    else:
        pipe.state_dict()  # the gather is a collective
