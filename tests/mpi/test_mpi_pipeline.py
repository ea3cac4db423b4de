"""Pipelines on real ranks equal one device: gradients and parameters after three steps, for
every flushing schedule, over dp × pp meshes, uneven batches and the tied embedding."""

import numpy as np
from device_helpers import host, on_device
from dp_helpers import assert_close, assert_same_state, replica_digests, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict
from pipeline_helpers import KINDS, make_batch, make_optimizer, make_pipeline, make_task

from scratchpar import nn
from scratchpar.data.shard import Part, rows, shard
from scratchpar.optim import SGD
from scratchpar.parallel import SingleDevice
from scratchpar.parallel.pipeline.stage import release
from scratchpar.train.task import Task

SYNC = ("naive", "gpipe", "1f1b", "interleaved", "bprio", "zb-h1")


def pp_sizes(size):
    return st.sampled_from([pp for pp in range(1, size + 1) if size % pp == 0])


def shape(schedule: str, pp: int, m: int, v: int) -> tuple[int, int]:
    """(m, v) that ``schedule`` accepts: naive runs one micro-batch, interleaved any m over
    v ≥ 2 chunks, the others any m on one chunk."""
    if schedule == "naive":
        return 1, 1
    return m, (v if schedule == "interleaved" else 1)


def pp_one(comm) -> bool:
    """A world of one rank: its one stage holds the whole model."""
    return comm.size == 1


def assert_like_one_device(pipe, one, rtol, atol):
    """Every parameter this stage holds, and its gradient, equal the one-device model's."""
    want = dict(one.model.named_parameters())
    for name, p in zip(pipe.stage.names, pipe.params):
        np.testing.assert_allclose(host(p.grad), host(want[name].grad), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of {name}")
        np.testing.assert_allclose(host(p.data), host(want[name].data), rtol=rtol, atol=atol,
                                   err_msg=f"{name}")


@settings(max_examples=12)
@given(data=st.data(), schedule=st.sampled_from(SYNC), kind=st.sampled_from(KINDS),
       m=st.integers(1, 4), v=st.integers(2, 3), extra=st.integers(0, 5), adam=st.booleans(),
       clip=st.sampled_from((0.0, 0.5)), seed=st.integers(0, 2**31))
@shared_verdict
def test_three_steps_equal_three_single_device_steps(comm, data, schedule, kind, m, v, extra,
                                                     adam, clip, seed):
    pp = data.draw(pp_sizes(comm.size), label="pp")
    dp = comm.size // pp
    m, v = shape(schedule, pp, m, v)
    depth = max(4, pp * v)
    mine, one = make_task(kind, seed, depth=depth), make_task(kind, seed, depth=depth)
    pipe = make_pipeline(comm, mine, schedule, pp, m, v, adam, clip)
    single = SingleDevice(one.model, make_optimizer(adam), one, grad_clip=clip)
    for step in range(3):
        batch = make_batch(kind, dp * m + extra + step, seed + step)  # rows not divisible
        got, want = pipe.step(batch), single.step(batch)
        assert got.keys() == want.keys()
        np.testing.assert_allclose([got["loss"], got["grad_norm"]],
                                   [want["loss"], want["grad_norm"]], rtol=1e-10)
    # Adam divides rounding-level gradients (exactly 0 on one device) by √v + ε: see test_mpi_dp
    assert_like_one_device(pipe, one, rtol=1e-9, atol=1e-10 if adam else 1e-13)
    assert len(set(replica_digests(pipe.mesh.dp_comm, pipe.stage))) == 1


@settings(max_examples=6)
@given(schedule=st.sampled_from(SYNC[1:]), kind=st.sampled_from(KINDS), seed=st.integers(0, 2**31))
@shared_verdict
def test_float32_gradients_equal_one_device(comm, schedule, kind, seed):
    pp = comm.size
    m, v = shape(schedule, pp, 2 * pp, 2)
    depth = max(4, pp * v)
    mine, one = (make_task(kind, seed, np.float32, depth), make_task(kind, seed, np.float32, depth))
    pipe = make_pipeline(comm, mine, schedule, pp, m, v)
    single = SingleDevice(one.model, make_optimizer(False), one)
    batch = make_batch(kind, m + 1, seed, np.float32)
    pipe.step(batch)
    single.step(batch)
    assert_like_one_device(pipe, one, rtol=1e-5, atol=1e-6)


@settings(max_examples=4)
@given(kind=st.sampled_from(KINDS), m=st.integers(1, 6), seed=st.integers(0, 2**31))
@shared_verdict
def test_zero_bubble_equals_1f1b_bitwise(comm, kind, m, seed):
    """ZB-H1 runs each micro-batch's weight gradients (W) apart from its B, later, in the order
    of the Bs: every gradient and every updated weight is 1F1B's, bit for bit."""
    runs = []
    for name in ("1f1b", "zb-h1"):
        pipe = make_pipeline(comm, make_task(kind, seed, depth=max(4, comm.size)), name,
                             comm.size, m, adam=True, clip=0.5)
        metrics = [pipe.step(make_batch(kind, m + step, seed + step)) for step in range(2)]
        runs.append(([(r["loss"], r["grad_norm"]) for r in metrics],
                     [host(p.grad).tobytes() + host(p.data).tobytes() for p in pipe.params]))
    assert runs[0] == runs[1]


@shared_verdict
def test_the_tied_embedding_copies_stay_bitwise_equal(comm):
    """The first and the last stage each hold the tied matrix; after steps they are one."""
    task = make_task("tied", 3)
    pipe = make_pipeline(comm, task, "1f1b", comm.size, 2, adam=True, clip=0.5)
    for step in range(3):
        pipe.step(make_batch("tied", 5, step))
    held = [host(p.data) for name, p in zip(pipe.stage.names, pipe.params) if name == "tok.weight"]
    copies = [c for c in pipe.mesh.pp_comm.allgather_obj(held[0] if held else None)
              if c is not None]
    assert len(copies) == (2 if comm.size > 1 else 1)
    assert all(np.array_equal(c, copies[0]) for c in copies)


@shared_verdict
def test_a_checkpoint_holds_the_whole_model_and_loads_into_any_layout(comm):
    """The pipeline leaves the caller's model whole; freed but for its stage's weights (as the
    command frees it), each rank holds only those until gather_model fills rank 0's model;
    rank 0's state is one device's, names and optimizer indices alike; and one device's state
    loaded into a pipeline (started from other weights) carries on like one device."""
    mine, one = make_task("tied", 5), make_task("tied", 5)
    pipe = make_pipeline(comm, mine, "gpipe", comm.size, 2, adam=True)
    single = SingleDevice(one.model, make_optimizer(True), one)
    for step in range(2):
        batch = make_batch("tied", 4, step)
        pipe.step(batch)
        single.step(batch)
    assert sum(p.size for p in mine.model.parameters()) == one.model.num_parameters()
    release(mine.model, pipe.params)
    held = sum(p.size for p in mine.model.parameters())  # the others' arrays were freed
    assert held == sum(p.size for p in pipe.params) < one.model.num_parameters() or pp_one(comm)
    pipe.gather_model()  # rank 0's model whole again, for the held-out evaluation
    if comm.rank == 0:
        assert_close([p.data for p in mine.model.parameters()],
                     [p.data for p in one.model.parameters()], rtol=1e-9, atol=1e-10)
    state = pipe.state_dict()
    want = snapshot(single.state_dict())
    other = make_task("tied", 99)
    resumed = make_pipeline(comm, other, "1f1b", comm.size, 3, adam=True)
    resumed.load_state_dict(want)
    batch = make_batch("tied", 6, 7)
    got, expected = resumed.step(batch), single.step(batch)
    np.testing.assert_allclose(got["loss"], expected["loss"], rtol=1e-10)
    assert_like_one_device(resumed, one, rtol=1e-9, atol=1e-10)
    if comm.rank != 0:
        assert state is None
        return
    assert_same_state(state, want)


@settings(max_examples=3)
@given(schedule=st.sampled_from(("gpipe", "1f1b", "bprio")))
@shared_verdict
def test_mebibyte_activations_flow_when_every_send_waits_for_its_receive(comm, schedule):
    """Above MPICH's eager limit a send completes only once its receive is posted, as the
    simulator assumes. With every send waited on at once, a schedule whose messages were
    ordered wrongly would deadlock (and the watchdog would fail the test)."""
    rows, width = 128, 2048  # two micro-batches of (64, 2048) float64: 1 MiB each
    gen = np.random.default_rng(0)
    mine = Task(None, nn.MLP([16, width, width, width, 4], gen, np.float64), "sample")
    pipe = make_pipeline(comm, mine, schedule, comm.size, 2,
                         optimizer=lambda params: SGD(params, lr=0.01))
    pipe.runtime.sync_sends = True
    batch = on_device(gen.standard_normal((rows, 16))), on_device(gen.integers(0, 4, rows))
    assert np.isfinite(pipe.step(batch)["loss"])
    assert comm.size == 1 or pipe.runtime.peak_bytes >= 2**20



@shared_verdict
def test_the_last_stage_keeps_its_losses_values_not_their_graphs(comm):
    """Backward is where a micro-batch's activations go: a loss kept with its graph for the
    step's total would hold every micro-batch's, and 1F1B's last stage would hold m of them
    instead of one."""
    gen = np.random.default_rng(0)
    mine = Task(None, nn.MLP([8, 16, 16, 16, 4], gen, np.float64), "sample")
    pipe = make_pipeline(comm, mine, "1f1b", comm.size, 4,
                         optimizer=lambda params: SGD(params, lr=0.01))
    batch = on_device(gen.standard_normal((16, 8))), on_device(gen.integers(0, 4, 16))
    pipe.step(batch)
    losses = pipe.runtime.losses.values()
    assert len(losses) == (4 if comm.rank == comm.size - 1 else 0)
    assert all(loss._ctx is None for loss in losses)


@settings(max_examples=6)
@given(data=st.data(), schedule=st.sampled_from(("1f1b", "interleaved", "pipedream")),
       kind=st.sampled_from(("mlp", "gpt", "lstm")), extra=st.integers(0, 3),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_a_replica_handed_its_rows_alone_steps_as_with_the_whole_batch(comm, data, schedule,
                                                                       kind, extra, seed):
    """The loop draws only ``rows(b)``, the rows of this rank's replica, and hands them as a
    Part: each step is the one on the whole batch, bit for bit, and reports N, the units of
    every replica's rows (with one replica, a stage reads every row: ``None``)."""
    pp = data.draw(pp_sizes(comm.size), label="pp")
    dp, (m, v) = comm.size // pp, shape(schedule, pp, 2, 2)
    runs = []
    for handed in ("whole", "rows"):
        task = make_task(kind, seed, depth=max(4, pp * v))
        pipe = make_pipeline(comm, task, schedule, pp, m, v, adam=True)
        metrics = []
        for step in range(2):
            whole = make_batch(kind, dp * m + extra + step, seed + step)
            b, units = rows(whole), float(host(task.count(whole)))
            span = pipe.rows(b)
            assert (span is None) == (dp == 1)
            batch = whole if handed == "whole" or span is None else \
                Part(shard(whole, pipe.mesh.dp_comm.rank, dp), *span, b)
            got = pipe.step(batch)
            assert got.pop("units", None) == (units if isinstance(batch, Part) else None)
            metrics.append(got)
        runs.append((metrics, [host(p.data).tobytes() for p in pipe.params]))
    assert runs[0] == runs[1]
